//! Snapshots of the assembler's diagnostics, rendered as the CLI shows them (no colour).

use rxvm_asm::{assemble, assemble_unverified, Diagnostics};

fn render(src: &str) -> String {
    render_named(src, "test.rxa")
}

fn render_named(src: &str, file: &str) -> String {
    match assemble_unverified(src, file) {
        Ok(_) => panic!("expected a diagnostic for:\n{src}"),
        Err(d) => d.render(),
    }
}

/// Through the verifier: the module assembles, and is refused.
fn render_verified(src: &str) -> String {
    match assemble_unverified(src, "test.rxa") {
        Ok(_) => {}
        Err(d) => panic!("expected the assembler to accept:\n{src}\n{}", d.render()),
    }
    match assemble(src, "test.rxa") {
        Ok(_) => panic!("expected a verifier diagnostic for:\n{src}"),
        Err(d) => d.render(),
    }
}

macro_rules! diag_test {
    ($name:ident, $src:expr) => {
        #[test]
        fn $name() {
            insta::assert_snapshot!(stringify!($name), render($src));
        }
    };
}

diag_test!(lex_bad_char, "func @main() {\n  %x = int 4 $ 5\n  ret\n}\n");
diag_test!(lex_unterminated_string, "func @main() {\n  %s = alloc_storage 64, scope \"global\n  ret\n}\n");
diag_test!(parse_missing_operand, "func @main() {\n  %x = mov\n  ret\n}\n");
diag_test!(parse_missing_call_argument, "func @main() {\n  call @vm.print(%a, )\n  ret\n}\n");
diag_test!(parse_wrong_token, "func @main() {\n  %s = alloc_storage 64\n  %t = alloc_tensor %s 0, f32[4]\n  ret\n}\n");
diag_test!(parse_unknown_mnemonic, "func @main() {\n  %s = alloc 64\n  ret\n}\n");
diag_test!(parse_unknown_statement, "func @main() {\n  frobnicate %x\n  ret\n}\n");
diag_test!(parse_ret_values, "func @main() -> int {\n  %a = int 1\n  ret %a %a\n}\n");
diag_test!(parse_bad_type, "func @main(%x: matrix) {\n  ret\n}\n");
diag_test!(parse_unclosed_brace, "func @main() {\n  ret\n");
diag_test!(parse_bad_clause, "func @main() {\n  %s = alloc_storage 64, alignment 8\n  ret\n}\n");
diag_test!(parse_module_not_first, "func @main() {\n  ret\n}\nmodule late\n");
diag_test!(unknown_builtin, "func @main(%x: f32[4]) {\n  call @vm.addd(%x, %x, %x)\n  ret\n}\n");
diag_test!(unknown_builtin_far, "func @main() {\n  call @vm.frobnicate()\n  ret\n}\n");
diag_test!(unknown_function, "func @helper() {\n  ret\n}\n\nfunc @main() {\n  call @helpr()\n  ret\n}\n");
diag_test!(unknown_label, "func @main() {\n  br loop\nlop:\n  ret\n}\n");
diag_test!(unknown_const, "const @weights: f32[1] = [1.0]\n\nfunc @main() {\n  %w = const @weight\n  ret\n}\n");
diag_test!(duplicate_function, "func @f() {\n  ret\n}\n\nfunc @f() {\n  ret\n}\n");
diag_test!(duplicate_const, "const @w: f32[1] = [1.0]\nconst @w: f32[1] = [2.0]\n");
diag_test!(duplicate_label, "func @main() {\nl:\n  nop\nl:\n  ret\n}\n");
diag_test!(duplicate_parameter, "func @main(%a: int, %a: float) {\n  ret\n}\n");
diag_test!(label_at_end, "func @main() {\n  ret\nend:\n}\n");
diag_test!(unknown_dtype, "func @main(%x: f31[4]) {\n  ret\n}\n");
diag_test!(
    unknown_dtype_in_alloc_tensor,
    "func @main() {\n  %s = alloc_storage 64\n  %t = alloc_tensor %s, 0, float32[4]\n  ret\n}\n"
);
diag_test!(unknown_scope, "func @main() {\n  %s = alloc_storage 64, scope \"texture\"\n  ret\n}\n");
diag_test!(const_count_mismatch, "const @w: f32[2, 2] = [1.0, 2.0, 3.0]\n");
diag_test!(const_not_a_tensor, "const @w: int = [1]\n");
diag_test!(const_unknown_dim, "const @w: f32[?] = [1.0]\n");
diag_test!(const_float_in_int, "const @w: i32[2] = [1, 2.5]\n");
diag_test!(const_int_out_of_range, "const @w: u8[3] = [0, 255, 256]\n");
diag_test!(const_float_out_of_range, "const @w: f16[1] = [70000.0]\n");
diag_test!(const_bool_out_of_range, "const @w: bool[2] = [true, 2]\n");
diag_test!(const_fill_not_integral, "const @w: i32[2] = fill(0.5)\n");
diag_test!(int_out_of_range, "func @main() {\n  %x = int 9223372036854775808\n  ret\n}\n");
diag_test!(int_arg_out_of_range, "func @main() {\n  %x = call @vm.iadd(1, -0x8000000000000001)\n  ret\n}\n");
diag_test!(align_not_power_of_two, "func @main() {\n  %s = alloc_storage 4096, align 48\n  ret\n}\n");
diag_test!(device_out_of_range, "func @main() {\n  %s = alloc_storage 4096, device 256\n  ret\n}\n");
diag_test!(nan_payload_out_of_range, "func @main() {\n  %x = float nan(0x10000000000000)\n  ret\n}\n");
diag_test!(bad_escape, "func @main() {\n  %s = alloc_storage 64, scope \"glo\\bal\"\n  ret\n}\n");
diag_test!(missing_destination, "func @main() {\n  int 5\n  ret\n}\n");
diag_test!(extra_destination, "func @main() {\n  %x = ret\n}\n");
diag_test!(
    several_errors_in_text_order,
    "func @main() {\n  br nowhere\n  %x = int 99999999999999999999\n  call @vm.nope()\n  ret\n}\n"
);

// Operator calls.
const OP_PRELUDE: &str = "func @main(%x: f32[4]) {\n  %s = alloc_storage 16\n  %y = alloc_tensor %s, 0, f32[4]\n";

fn op_prog(body: &str) -> String {
    format!("{OP_PRELUDE}{body}  ret\n}}\n")
}

#[test]
fn op_unknown_operator() {
    insta::assert_snapshot!("op_unknown_operator", render(&op_prog("  call @onnx.Relux(%x) -> (%y)\n")));
}

#[test]
fn op_unknown_operator_case() {
    let d = match assemble_unverified(&op_prog("  call @onnx.relu(%x) -> (%y)\n"), "t.rxa") {
        Ok(_) => panic!("must fail"),
        Err(d) => d,
    };
    assert_eq!(d.items()[0].message, "unknown operator `@onnx.relu`");
    assert_eq!(d.items()[0].notes, ["did you mean `@onnx.Relu`?"]);
}

#[test]
fn op_none_output() {
    insta::assert_snapshot!("op_none_output", render(&op_prog("  call @onnx.Relu(%x) -> (none)\n")));
}

#[test]
fn op_constant_output() {
    let src = format!("const @w: f32[4] = fill(1.0)\n\n{}", op_prog("  call @onnx.Relu(%x) -> (@w)\n"));
    insta::assert_snapshot!("op_constant_output", render(&src));
}

#[test]
fn op_literal_input() {
    insta::assert_snapshot!("op_literal_input", render(&op_prog("  call @onnx.Relu(1.5) -> (%y)\n")));
}

#[test]
fn op_alloc_too_many_destinations() {
    let src = "func @main(%x: f32[4]) {\n  %y, %z = call @onnx.Relu(%x)\n  ret\n}\n";
    insta::assert_snapshot!("op_alloc_too_many_destinations", render_verified(src));
}

#[test]
fn op_destination_with_outputs() {
    let src = op_prog("  %y = call @onnx.Add(%x, %x) -> (%y) { axis = 0 }\n");
    insta::assert_snapshot!("op_destination_with_outputs", render(&src));
}

#[test]
fn op_duplicate_attribute() {
    let src = op_prog("  call @onnx.Add(%x, %x) -> (%y) { axis = 0, broadcast = 1, axis = 1 }\n");
    insta::assert_snapshot!("op_duplicate_attribute", render(&src));
}

#[test]
fn op_unterminated_attribute_block() {
    let src = op_prog("  call @onnx.Add(%x, %x) -> (%y) { broadcast = 1,\n    axis = 0\n");
    insta::assert_snapshot!("op_unterminated_attribute_block", render(&src));
}

#[test]
fn op_bad_attribute_value() {
    let src = op_prog("  call @onnx.Add(%x, %x) -> (%y) { axis = %x }\n");
    insta::assert_snapshot!("op_bad_attribute_value", render(&src));
}

#[test]
fn op_none_required_input() {
    insta::assert_snapshot!(
        "op_none_required_input",
        render_verified(&op_prog("  call @onnx.Add(%x, none) -> (%y)\n"))
    );
}

#[test]
fn op_too_many_inputs() {
    insta::assert_snapshot!("op_too_many_inputs", render_verified(&op_prog("  call @onnx.Relu(%x, %x) -> (%y)\n")));
}

#[test]
fn op_output_not_a_tensor() {
    let src = op_prog("  %n = int 4\n  call @onnx.Relu(%x) -> (%n)\n");
    insta::assert_snapshot!("op_output_not_a_tensor", render_verified(&src));
}

#[test]
fn op_unknown_attribute() {
    // The message lists the operator's attributes; the caret is under the attribute.
    let src = op_prog("  call @onnx.Add(%x, %x) -> (%y) {\n    broadcast = 1,\n    axes = 0\n  }\n");
    insta::assert_snapshot!("op_unknown_attribute", render_verified(&src));
}

#[test]
fn op_attribute_wrong_kind() {
    let src = op_prog("  call @onnx.Add(%x, %x) -> (%y) { broadcast = 1, axis = [0] }\n");
    insta::assert_snapshot!("op_attribute_wrong_kind", render_verified(&src));
}

#[test]
fn op_attribute_of_an_operator_without_attributes() {
    let src = op_prog("  call @onnx.Relu(%x) -> (%y) { alpha = 0.5 }\n");
    insta::assert_snapshot!("op_attribute_of_an_operator_without_attributes", render_verified(&src));
}

#[test]
fn op_function_name_reserved() {
    let d = match assemble_unverified("func @onnx.Mine() {\n  ret\n}\n", "t.rxa") {
        Ok(_) => panic!("must fail"),
        Err(d) => d,
    };
    assert_eq!(d.items()[0].message, "function name `@onnx.Mine` starts with `onnx.`");
}

#[test]
fn too_many_dimensions() {
    let dims = vec!["1"; 256].join(", ");
    let src = format!("func @main() {{\n  %s = shape [{dims}]\n  ret\n}}\n");
    let d = match assemble_unverified(&src, "test.rxa") {
        Ok(_) => panic!("256 dims must be refused"),
        Err(d) => d,
    };
    assert_eq!(d.items()[0].message, "too many dimensions: more than 255");
    // At the 256th: the parser stops there.
    let at = src.find("shape [").unwrap_or(0) + "shape [".len() + 3 * 255;
    assert_eq!(d.items()[0].span, at..at + 1);
}

/// Every list whose count the encoding stores in 8 or 16 bits is refused by the parser at
/// its first element too many, with the limit in the message: a huge list is never read
/// (nor held) whole. A list of exactly the limit is not refused by the parser.
#[test]
fn lists_are_refused_at_their_first_element_past_the_limit() {
    let n = |k: usize, item: &str| vec![item; k].join(", ");
    type Line = Box<dyn Fn(usize) -> String>;
    let cases: Vec<(&str, usize, Line)> = vec![
        ("shape dimensions", 255, Box::new(move |k| format!("  %s = shape [{}]", n(k, "1")))),
        ("view dimensions", 255, Box::new(move |k| format!("  %t = alloc_tensor %st, 0, f32[{}]", n(k, "1")))),
        ("destinations", 255, Box::new(move |k| format!("  {} = call @f()", n(k, "%d")))),
        ("call arguments", 65535, Box::new(move |k| format!("  call @f({})", n(k, "1")))),
        ("return values", 65535, Box::new(move |k| format!("  ret {}", n(k, "1")))),
        ("operator inputs", 65535, Box::new(move |k| format!("  call @onnx.Sum({}) -> (%y)", n(k, "%x")))),
        ("operator outputs", 255, Box::new(move |k| format!("  call @onnx.Split(%x) -> ({})", n(k, "%y")))),
        ("kernel arguments", 65535, Box::new(move |k| format!("  call @cl.k({}) global [1]", n(k, "%x")))),
        ("kernel global sizes", 255, Box::new(move |k| format!("  call @cl.k(%x) global [{}]", n(k, "1")))),
    ];
    let mut out = String::new();
    for (name, max, line) in cases {
        let src = |k: usize| format!("func @main() {{\n{}\n  ret\n}}\n", line(k));
        let message = |k: usize| match assemble_unverified(&src(k), "test.rxa") {
            Ok(_) => String::new(),
            Err(d) => d.items()[0].message.clone(),
        };
        let over = message(max + 1);
        assert!(over.starts_with("too many ") && over.ends_with(&format!(": more than {max}")), "{name}: {over}");
        assert!(!message(max).contains("more than"), "{name}: {max} elements refused: {}", message(max));
        out.push_str(&format!("{name}: {over}\n"));
    }
    // Tensor types, in a signature.
    let sig = |k: usize| format!("func @main(%x: f32[{}]) {{\n  ret\n}}\n", n(k, "1"));
    let d = assemble_unverified(&sig(256), "test.rxa").err().map(|d| d.items()[0].message.clone());
    assert_eq!(d.as_deref(), Some("too many dimensions: more than 255"));
    out.push_str(&format!("type dimensions: {}\n", d.unwrap_or_default()));
    assert!(assemble_unverified(&sig(255), "test.rxa").is_ok());
    insta::assert_snapshot!("list_limits", out);
}

/// A source line longer than `MAX_SHOWN_LINE` is shown as a window around the error, with
/// `…` where it is cut; line and column are those of the whole line.
#[test]
fn long_lines_are_clipped_around_the_error() {
    let pad = "1, ".repeat(2000);
    let src = format!("func @main() {{\n  call @vm.print({pad}%x $ {pad}%x)\n  ret\n}}\n");
    let text = render(&src);
    let col = "  call @vm.print(".len() + pad.len() + "%x ".len() + 1;
    assert!(text.contains(&format!("test.rxa:2:{col}")), "{text}");
    assert!(text.len() < 1000, "{} bytes:\n{text}", text.len());
    insta::assert_snapshot!("long_line_clipped", text);
    // A short line is shown whole, as before.
    let text = render("func @main() {\n  call @vm.print(1, %x $ 2)\n  ret\n}\n");
    assert!(text.contains("call @vm.print(1, %x $ 2)") && !text.contains('…'), "{text}");
}

#[test]
fn const_file_missing() {
    let src = "const @m: f32[4, 4] = file(\"no_such.bin\")\n";
    insta::assert_snapshot!("const_file_missing", render_named(src, "tests/data/prog.rxa"));
}

#[test]
fn const_file_wrong_size() {
    let src = "const @m: f32[2] = file(\"ten_bytes.bin\")\n";
    insta::assert_snapshot!("const_file_wrong_size", render_named(src, "tests/data/prog.rxa"));
}

#[test]
fn unreadable_source_file() {
    let d = match rxvm_asm::assemble_file(std::path::Path::new("tests/data/does_not_exist.rxa")) {
        Ok(_) => panic!("no such file"),
        Err(d) => d,
    };
    let text = d.render();
    assert!(text.starts_with("error: cannot read tests/data/does_not_exist.rxa"), "{text}");
}

#[test]
fn parse_errors_carry_expected_and_found() {
    let d: Diagnostics = match assemble("func @main() {\n  call @vm.print(%a, )\n  ret\n}\n", "t.rxa") {
        Ok(_) => panic!("must fail"),
        Err(d) => d,
    };
    let e = &d.items()[0];
    assert_eq!(e.expected, ["`%register`", "integer", "float", "`@constant`"]);
    assert_eq!(e.found.as_deref(), Some("`)`"));
    assert_eq!(e.span, 36..37);
    // Display is the rendering; Diagnostics is an Error.
    let as_error: &dyn std::error::Error = &d;
    assert_eq!(as_error.to_string(), d.render());
    assert!(d.render_color().contains("\u{1b}["), "colour output has escapes");
}

#[test]
fn runtime_errors_render_like_assembler_errors() {
    let src = "func @main() {\n  %x = call @vm.idiv(1, 0)   ; boom\n  ret\n}\n";
    let text =
        rxvm_asm::render_runtime_error(src, "prog.rxa", 2, 3, "division by zero", &["in @main, instruction 0".into()]);
    insta::assert_snapshot!("runtime_error", text);
}

// User OpenCL kernels.
const KERNEL_PRELUDE: &str = "kernel @scale = opencl(\"scale\", \"__kernel void scale(__global float* x) {}\")\n\n";

fn kernel_prog(body: &str) -> String {
    format!("{KERNEL_PRELUDE}func @main(%x: f32[4]) {{\n{body}  ret\n}}\n")
}

#[test]
fn kernel_unknown() {
    insta::assert_snapshot!("kernel_unknown", render(&kernel_prog("  call @cl.scal(%x) global [4]\n")));
}

#[test]
fn kernel_missing_global() {
    insta::assert_snapshot!("kernel_missing_global", render(&kernel_prog("  call @cl.scale(%x)\n")));
}

#[test]
fn kernel_four_global_dims() {
    insta::assert_snapshot!(
        "kernel_four_global_dims",
        render(&kernel_prog("  call @cl.scale(%x) global [4, 1, 1, 1]\n"))
    );
}

#[test]
fn kernel_file_missing() {
    let src = "kernel @k = opencl(\"k\", file(\"no_such.cl\"))\n";
    insta::assert_snapshot!("kernel_file_missing", render_named(src, "tests/data/prog.rxa"));
}

#[test]
fn kernel_duplicate() {
    let src = format!("{KERNEL_PRELUDE}kernel @scale = opencl(\"scale2\", \"\")\n");
    insta::assert_snapshot!("kernel_duplicate", render(&src));
}

#[test]
fn kernel_destination() {
    let d = match assemble_unverified(&kernel_prog("  %y = call @cl.scale(%x) global [4]\n"), "t.rxa") {
        Ok(_) => panic!("must fail"),
        Err(d) => d,
    };
    assert_eq!(d.items()[0].message, "a kernel call has no destinations");
    assert_eq!(d.items()[0].notes[1], "write the call without `%y =`");
}

#[test]
fn kernel_file_not_utf8() {
    let d = match assemble_unverified("kernel @k = opencl(\"k\", file(\"not_utf8.cl\"))\n", "tests/data/p.rxa") {
        Ok(_) => panic!("must fail"),
        Err(d) => d,
    };
    assert_eq!(d.items()[0].message, "`not_utf8.cl` is not UTF-8 text");
}

#[test]
fn kernel_function_name_reserved() {
    let d = match assemble_unverified("func @cl.mine() {\n  ret\n}\n", "t.rxa") {
        Ok(_) => panic!("must fail"),
        Err(d) => d,
    };
    assert_eq!(d.items()[0].message, "function name `@cl.mine` starts with `cl.`");
}
