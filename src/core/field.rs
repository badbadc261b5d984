//! A value the lock records for a component, package or fact: a string or a list of
//! strings. The selection (`crate::select`) produces them and the lock writes them; both
//! name this one type.

/// A field value in a locked component, package or fact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Field {
    /// A string.
    Str(String),
    /// A list of strings.
    List(Vec<String>),
}
