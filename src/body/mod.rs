//! Request body processors: turn a buffered body into arguments.
