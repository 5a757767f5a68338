#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use clap::Parser;

fn main() {
    // `RXVM_LOG=debug` shows the VM's debug log, e.g. why an input or output was copied.
    env_logger::Builder::from_env(env_logger::Env::new().filter("RXVM_LOG")).format_timestamp(None).init();
    let cli = rxvm::cli::Cli::parse();
    // Oclgrind (an OpenCL simulator) prints the invalid accesses it finds and lets the
    // kernel finish. Its log goes to a file of this process instead, which the OpenCL
    // device reads after each launch, so that such a report fails the run. Set before any
    // OpenCL context exists (Oclgrind reads it when one is created); a log the user chose
    // with OCLGRIND_LOG is used as it is.
    let own_log = std::env::var_os("OCLGRIND_LOG").is_none().then(|| {
        let path = std::env::temp_dir().join(format!("rxvm-oclgrind-{}.log", std::process::id()));
        std::env::set_var("OCLGRIND_LOG", &path);
        path
    });
    let code = rxvm::cli::main_with(cli);
    if let Some(path) = own_log {
        let _ = std::fs::remove_file(path);
    }
    std::process::exit(code);
}
