//! The explanation of a request without a solution, as data: the conflicts in the user's
//! words ([`Cause`]), each rule broken ([`Violation`], with its stable [`Rule`] id and the
//! catalog [`Fact`]s that decide it), and the hints. The solver builds it and formats it
//! (`solve/explain.rs`, which also writes its `Display`); it lives beside the error types so
//! that [`Error::NoSolution`](super::Error::NoSolution) needs nothing from the solver.

use std::fmt;

use crate::core::Component;

/// Why no stack exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation {
    /// The stack's name.
    pub stack: String,
    /// The conflicts, most direct first.
    pub causes: Vec<Cause>,
    /// Changes to the request that resolve (each checked by the solver).
    pub hints: Vec<String>,
}

/// One component that has no usable candidate, or a neighbour that explains why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// The component.
    pub component: Component,
    /// What the user asked for it.
    pub requested: String,
    /// `true` for the component whose domain emptied; `false` for context.
    pub primary: bool,
    /// Groups of candidates ruled out by the same rule: (versions, the first violation).
    pub groups: Vec<(Vec<String>, Violation)>,
    /// Candidates still possible (context causes only).
    pub remaining: Vec<String>,
    /// How many candidates only your request ruled out.
    pub outside_request: usize,
    /// When the request matches nothing: the catalog versions nearest to it.
    pub nearest: Vec<String>,
}

/// Every rule the solver applies. The id (`Rule::id`) is stable and documented.
/// New rules come with new catalog facts, so a `match` on it needs a `_` arm
/// (`#[non_exhaustive]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// The version must satisfy the user's requirement.
    Request,
    /// The installed driver is a host fact.
    HostDriver,
    /// Legacy GPUs stop at a driver branch (Volta: R580).
    GpuLastBranch,
    /// Some GPUs need a minimum driver.
    GpuMinDriver,
    /// A GPU architecture is supported from a first driver to a last branch.
    GpuGenerationDriver,
    /// nvcc must accept a target for every GPU.
    NvccTargets,
    /// A CUDA release known only from NVIDIA's redistrib manifest is listed, never locked.
    CudaRedistOnly,
    /// The OS must have images for the CUDA release.
    OsImages,
    /// The driver must support the CUDA toolkit (full, minor-version or forward compatibility).
    DriverCuda,
    /// A torch wheel's arch list must run on every GPU.
    TorchArchList,
    /// The driver must run the CUDA runtime a wheel bundles.
    WheelRuntimeDriver,
    /// A torch wheel's CUDA must share the toolkit's major and not be newer.
    TorchToolkit,
    /// Wheels exist only for some Python versions.
    WheelPython,
    /// cuDNN comes from the torch wheel's pin.
    TorchCudnnPin,
    /// NCCL comes from the torch wheel's pin.
    TorchNcclPin,
    /// cuDNN/NCCL ship builds per CUDA major.
    LibCudaMajor,
    /// cuDNN/NCCL drop old GPUs.
    LibMinCc,
    /// cuDNN/NCCL have kernels for new GPUs only from some release on.
    LibGpuSupport,
    /// Every locked wheel must have a file pip installs on the OS's glibc and CPU.
    WheelPlatform,
    /// A release's install, its dependencies' wheels included, needs a minimum glibc.
    DependencyGlibc,
    /// A release yanked on PyPI (PEP 592) is never locked.
    Yanked,
    /// vLLM pins torch exactly and its wheel's CUDA major.
    VllmTorchPin,
    /// vLLM needs a minimum compute capability.
    VllmMinCc,
    /// DeepSpeed's torch requirement.
    DeepspeedTorch,
    /// The oldest DeepSpeed that works with a torch minor.
    DeepspeedTorchMinimum,
    /// DeepSpeed builds its ops with nvcc, which must match torch's CUDA.
    DeepspeedNvcc,
    /// An extra's own requirement on torch (release, without the `+cuXXX` label).
    ExtraTorch,
    /// An extra's published Python range.
    ExtraPython,
    /// An extra needs a minimum compute capability on every GPU.
    ExtraMinCc,
    /// An extra's binaries exist for some CUDA majors only: torch's CUDA variant must be one.
    ExtraCudaMajor,
    /// A torch source build needs the release's `[[source]]` entry.
    TorchSource,
    /// A torch source build's arch list must run on every GPU.
    TorchSourceArchs,
    /// A torch source build compiles with the toolkit: the same CUDA minor, and nvcc must
    /// accept every arch it builds.
    TorchSourceToolkit,
    /// A torch source build needs a minimum cuDNN.
    TorchSourceCudnn,
    /// A torch source build's arch list must be entries the release's CMake accepts.
    TorchSourceArchNames,
    /// A torch source build's host GCC (the OS's) must be at least PyTorch's minimum and at
    /// most the newest nvcc accepts.
    TorchSourceCompiler,
}

impl Rule {
    /// The stable id used in messages, locks and the book.
    pub fn id(self) -> &'static str {
        match self {
            Rule::Request => "request",
            Rule::HostDriver => "host.driver",
            Rule::GpuLastBranch => "gpu.last-driver-branch",
            Rule::GpuMinDriver => "gpu.min-driver",
            Rule::GpuGenerationDriver => "gpu.generation-driver",
            Rule::NvccTargets => "cuda.nvcc-targets",
            Rule::CudaRedistOnly => "cuda.redist-only",
            Rule::OsImages => "os.cuda-images",
            Rule::DriverCuda => "cuda.driver",
            Rule::TorchArchList => "torch.arch-list",
            Rule::WheelRuntimeDriver => "wheel.runtime-driver",
            Rule::TorchToolkit => "torch.cuda-toolkit",
            Rule::WheelPython => "wheel.python",
            Rule::TorchCudnnPin => "torch.cudnn-pin",
            Rule::TorchNcclPin => "torch.nccl-pin",
            Rule::LibCudaMajor => "lib.cuda-major",
            Rule::LibMinCc => "lib.min-cc",
            Rule::LibGpuSupport => "lib.gpu-support",
            Rule::WheelPlatform => "wheel.platform",
            Rule::DependencyGlibc => "wheel.dependency-glibc",
            Rule::Yanked => "pypi.yanked",
            Rule::VllmTorchPin => "vllm.torch-pin",
            Rule::VllmMinCc => "vllm.min-cc",
            Rule::DeepspeedTorch => "deepspeed.torch",
            Rule::DeepspeedTorchMinimum => "deepspeed.torch-minimum",
            Rule::DeepspeedNvcc => "deepspeed.nvcc-matches-torch",
            Rule::ExtraTorch => "extra.torch",
            Rule::ExtraPython => "extra.python",
            Rule::ExtraMinCc => "extra.min-cc",
            Rule::ExtraCudaMajor => "extra.cuda-major",
            Rule::TorchSource => "torch.source",
            Rule::TorchSourceArchs => "torch.source-archs",
            Rule::TorchSourceToolkit => "torch.source-toolkit",
            Rule::TorchSourceCudnn => "torch.source-cudnn",
            Rule::TorchSourceArchNames => "torch.source-arch-names",
            Rule::TorchSourceCompiler => "torch.source-compiler",
        }
    }
}

/// A broken rule, in the user's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which rule.
    pub rule: Rule,
    /// What is wrong, lowercase, no trailing period.
    pub message: String,
    /// The catalog facts that decide it.
    pub facts: Vec<Fact>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A catalog fact a rule relies on: its entry's file and line, and the upstream source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    /// `catalog/cuda.toml` for the stock catalog; the overlay path as given otherwise.
    pub file: String,
    /// 1-based line of the entry.
    pub line: usize,
    /// The upstream source a reader can open.
    pub source: String,
}

impl Fact {
    /// `catalog/cuda.toml:42`.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}
