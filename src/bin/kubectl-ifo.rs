//! `kubectl-ifo`: the kubectl plugin (`kubectl ifo ...`); see `ifo::plugin`.

fn main() -> std::process::ExitCode {
    ifo::plugin::main()
}
