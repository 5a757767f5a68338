#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use clap::Parser;

fn main() {
    // `RXVM_LOG=debug` shows the VM's debug log, e.g. why an input or output was copied.
    env_logger::Builder::from_env(env_logger::Env::new().filter("RXVM_LOG")).format_timestamp(None).init();
    let cli = rxvm::cli::Cli::parse();
    std::process::exit(rxvm::cli::main_with(cli));
}
