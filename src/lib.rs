pub use rusty_stack::*;
