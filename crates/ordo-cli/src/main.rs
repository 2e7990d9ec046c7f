//! The `ordo` command.
#![forbid(unsafe_code)]

fn main() {
    println!("ordo");
}
