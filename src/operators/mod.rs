//! Operators (`@name`): one file per operator, behind one closed enum.
pub mod libinjection;
