//! `kubectl-ifo`: the kubectl plugin (`kubectl ifo ...`); see the library of this crate.

fn main() -> std::process::ExitCode {
    kubectl_ifo::main()
}
