//! The shared vocabulary of every stage: versions, GPU targets, components and layers, the
//! kinds a spec names (fabric, cloud, storage), how typed names are compared, and the bounded
//! reading of input files.
//!
//! Nothing here depends on another module of the crate; every other module may depend on
//! this one (book/src/architecture.md, "Layout").

pub mod arch;
pub(crate) mod compiled;
pub mod component;
pub mod field;
pub mod fs;
pub mod kinds;
pub mod names;
pub mod url;
pub mod version;

pub(crate) use component::extra_pattern;
pub use component::{Component, Layer};
pub use field::Field;
pub use kinds::{Cloud, Fabric, StorageRef};
