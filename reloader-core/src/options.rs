//! The command line and environment, typed and validated.
