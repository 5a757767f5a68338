//! `docs/operators.md` carries the operator table generated from the operator registry,
//! so it cannot drift. `RXVM_BLESS=1 cargo test --test operators_doc` rewrites it.

const BEGIN: &str = "<!-- BEGIN GENERATED OPERATOR TABLE -->\n";
const END: &str = "<!-- END GENERATED OPERATOR TABLE -->";

#[test]
fn operator_table_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operators.md");
    let doc = std::fs::read_to_string(&path).expect("docs/operators.md");
    let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("docs/operators.md lacks the table markers")
    };
    let table = rxvm::vm::ops::markdown_table();
    let current = &doc[b + BEGIN.len()..e];
    if current != table {
        if std::env::var("RXVM_BLESS").is_ok() {
            let new = format!("{}{BEGIN}{table}{}", &doc[..b], &doc[e..]);
            std::fs::write(&path, new).expect("write docs/operators.md");
        } else {
            panic!("docs/operators.md's operator table is stale; run RXVM_BLESS=1 cargo test --test operators_doc\n{table}");
        }
    }
}
