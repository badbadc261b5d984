//! The per-target plans: syntax only. Each turns the shared decisions (`plan::{common,
//! workload, host, network, python, torch_build}`) into one output directory's files; a
//! value two targets need is decided in the shared plan, not here (book/src/architecture.md).

pub mod apptainer;
pub mod docker;
pub mod k8s;
pub mod packer;
pub mod slurm;
