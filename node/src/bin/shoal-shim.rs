//! Single-threaded helper spawned by the Shoal runtime; see `shoal_node::shim`.

fn main() {
    shoal_node::shim::main()
}
