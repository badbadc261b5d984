//! The stack's components and the layers they install into: the vocabulary every stage shares.

use std::fmt;

use crate::core::names::{did_you_mean, name_key};

/// A component of the stack. The set grows with the catalog's families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Component {
    /// The NVIDIA kernel driver.
    Driver,
    /// The CUDA toolkit (`nvidia/cuda` base image, `nvcc`).
    Cuda,
    /// cuDNN.
    Cudnn,
    /// NCCL.
    Nccl,
    /// CPython.
    Python,
    /// PyTorch, one CUDA wheel variant.
    Torch,
    /// vLLM.
    Vllm,
    /// DeepSpeed.
    Deepspeed,
    /// flash-attn (FlashAttention), an optional framework component ("extra").
    FlashAttn,
    /// xFormers, an extra.
    Xformers,
    /// Hugging Face Transformers, an extra.
    Transformers,
    /// Hugging Face Accelerate, an extra.
    Accelerate,
    /// bitsandbytes, an extra.
    Bitsandbytes,
    /// TensorRT-LLM, an extra.
    TensorrtLlm,
    /// CuPy, an extra.
    Cupy,
    /// NVIDIA DALI, an extra.
    NvidiaDali,
}

impl Component {
    /// Every component, in lock order.
    pub const ALL: [Component; 16] = [
        Component::Driver,
        Component::Cuda,
        Component::Cudnn,
        Component::Nccl,
        Component::Python,
        Component::Torch,
        Component::Vllm,
        Component::Deepspeed,
        Component::FlashAttn,
        Component::Xformers,
        Component::Transformers,
        Component::Accelerate,
        Component::Bitsandbytes,
        Component::TensorrtLlm,
        Component::Cupy,
        Component::NvidiaDali,
    ];

    /// The optional framework components ("extras"): Python packages installed on top of
    /// torch, each from the catalog's `extra` family. Their ids are the PyPI project names.
    pub const EXTRAS: [Component; 8] = [
        Component::FlashAttn,
        Component::Xformers,
        Component::Transformers,
        Component::Accelerate,
        Component::Bitsandbytes,
        Component::TensorrtLlm,
        Component::Cupy,
        Component::NvidiaDali,
    ];

    /// `true` for the optional framework components ([`Component::EXTRAS`]).
    pub fn is_extra(self) -> bool {
        Component::EXTRAS.contains(&self)
    }

    /// The id used in specs and locks.
    pub fn name(self) -> &'static str {
        match self {
            Component::Driver => "driver",
            Component::Cuda => "cuda",
            Component::Cudnn => "cudnn",
            Component::Nccl => "nccl",
            Component::Python => "python",
            Component::Torch => "torch",
            Component::Vllm => "vllm",
            Component::Deepspeed => "deepspeed",
            Component::FlashAttn => "flash-attn",
            Component::Xformers => "xformers",
            Component::Transformers => "transformers",
            Component::Accelerate => "accelerate",
            Component::Bitsandbytes => "bitsandbytes",
            Component::TensorrtLlm => "tensorrt-llm",
            Component::Cupy => "cupy",
            Component::NvidiaDali => "nvidia-dali",
        }
    }

    /// How users write it in prose.
    pub fn display(self) -> &'static str {
        match self {
            Component::Driver => "driver",
            Component::Cuda => "CUDA",
            Component::Cudnn => "cuDNN",
            Component::Nccl => "NCCL",
            Component::Python => "Python",
            Component::Torch => "torch",
            Component::Vllm => "vLLM",
            Component::Deepspeed => "DeepSpeed",
            Component::FlashAttn => "flash-attn",
            Component::Xformers => "xFormers",
            Component::Transformers => "Transformers",
            Component::Accelerate => "Accelerate",
            Component::Bitsandbytes => "bitsandbytes",
            Component::TensorrtLlm => "TensorRT-LLM",
            Component::Cupy => "CuPy",
            Component::NvidiaDali => "DALI",
        }
    }

    /// Parses a component id.
    pub fn from_name(s: &str) -> Option<Component> {
        Component::ALL.into_iter().find(|c| c.name() == s)
    }

    /// A component named on the command line: exact, or after [`name_key`]
    /// (`TORCH`, `flash_attn`, `Flash Attn`); `Err` carries the closest name, if any, for a
    /// "did you mean" hint (`pytorch` → `torch`).
    ///
    /// ```
    /// use gpustack::Component;
    /// assert_eq!(Component::lookup("TORCH"), Ok(Component::Torch));
    /// assert_eq!(Component::lookup("flash_attn"), Ok(Component::FlashAttn));
    /// assert_eq!(Component::lookup("pytorch"), Err(Some("torch")));
    /// ```
    pub fn lookup(s: &str) -> Result<Component, Option<&'static str>> {
        if let Some(c) = Component::from_name(s) {
            return Ok(c);
        }
        let k = name_key(s);
        Component::ALL
            .into_iter()
            .find(|c| name_key(c.name()) == k)
            .ok_or_else(|| did_you_mean(s, Component::ALL.iter().map(|c| c.name())))
    }

    /// The image/VM layer the component belongs to. An extra's layer is the one every
    /// catalog entry of it states (checked when the catalog loads).
    pub fn layer(self) -> Layer {
        match self {
            Component::Driver | Component::Cuda | Component::Cudnn | Component::Nccl => Layer::Base,
            Component::Python | Component::Torch => Layer::Framework,
            Component::Vllm => Layer::Inference,
            Component::Deepspeed => Layer::Training,
            Component::FlashAttn
            | Component::Xformers
            | Component::Transformers
            | Component::Bitsandbytes
            | Component::Cupy => Layer::Framework,
            Component::TensorrtLlm => Layer::Inference,
            Component::Accelerate | Component::NvidiaDali => Layer::Training,
        }
    }
}

/// A pattern matching every extra component, for exhaustive `match`es (in step with
/// [`Component::EXTRAS`]; the compiler checks the variants exist).
macro_rules! extra_pattern {
    () => {
        $crate::core::Component::FlashAttn
            | $crate::core::Component::Xformers
            | $crate::core::Component::Transformers
            | $crate::core::Component::Accelerate
            | $crate::core::Component::Bitsandbytes
            | $crate::core::Component::TensorrtLlm
            | $crate::core::Component::Cupy
            | $crate::core::Component::NvidiaDali
    };
}
pub(crate) use extra_pattern;

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A layer of the images and VM templates. Each layer's closure hash covers its own pins
/// and the hashes of the layers below.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Layer {
    /// Driver, CUDA, cuDNN, NCCL, the arch list.
    Base,
    /// Python and torch; the extras flash-attn, xFormers, Transformers, bitsandbytes, CuPy.
    Framework,
    /// vLLM; the extra TensorRT-LLM.
    Inference,
    /// DeepSpeed; the extras Accelerate and DALI.
    Training,
    /// The acceptance test (nccl-tests) on top of the base.
    Validate,
    /// What only a VM image installs on top of the base (Container Toolkit, DCGM, Fabric
    /// Manager); not a container image layer.
    Host,
}

impl Layer {
    /// Every container image layer, bottom first (the default of `[image].layers`).
    pub const ALL: [Layer; 5] = [
        Layer::Base,
        Layer::Framework,
        Layer::Inference,
        Layer::Training,
        Layer::Validate,
    ];

    /// Every layer a lock may hold, in lock order.
    pub const EVERY: [Layer; 6] = [
        Layer::Base,
        Layer::Framework,
        Layer::Inference,
        Layer::Training,
        Layer::Validate,
        Layer::Host,
    ];

    /// `base`, `framework`, `inference`, `training`, `validate`, `host`.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Base => "base",
            Layer::Framework => "framework",
            Layer::Inference => "inference",
            Layer::Training => "training",
            Layer::Validate => "validate",
            Layer::Host => "host",
        }
    }

    /// The layer directly below, if any.
    pub fn parent(self) -> Option<Layer> {
        match self {
            Layer::Base => None,
            Layer::Framework | Layer::Validate | Layer::Host => Some(Layer::Base),
            Layer::Inference | Layer::Training => Some(Layer::Framework),
        }
    }

    /// Parses a container image layer name.
    pub fn from_name(s: &str) -> Option<Layer> {
        Layer::ALL.into_iter().find(|l| l.name() == s)
    }

    /// Parses any layer name, `host` included.
    pub fn from_any_name(s: &str) -> Option<Layer> {
        Layer::EVERY.into_iter().find(|l| l.name() == s)
    }
}
