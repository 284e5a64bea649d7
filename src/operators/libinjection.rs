//! libinjection wrapper (in progress).
