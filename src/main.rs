use clap::Parser;

fn main() {
    let cli = rxvm::cli::Cli::parse();
    std::process::exit(rxvm::cli::main_with(cli));
}
