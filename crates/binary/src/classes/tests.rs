use super::*;
use iced_x86::{Decoder, DecoderOptions};

fn classify_bytes(classifier: &Classifier, bytes: &[u8]) -> (Class, u16) {
    let mut decoder = Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE);
    let instr = decoder.decode();
    assert!(!instr.is_invalid(), "{bytes:02x?} does not decode");
    assert_eq!(
        instr.len(),
        bytes.len(),
        "{bytes:02x?} is more than one instruction"
    );
    classifier.classify(&instr, &mut InstructionInfoFactory::new())
}

fn check(bytes: &[u8], class: Class, tags: u16) {
    let got = classify_bytes(&Classifier::new(), bytes);
    assert_eq!(got, (class, tags), "{bytes:02x?}");
}

#[test]
fn stack_and_moves_are_load_store() {
    check(&[0x55], Class::Ls, tag::STORE); // push rbp
    check(&[0x5d], Class::Ls, tag::LOAD); // pop rbp
    check(&[0x48, 0x8b, 0x03], Class::Ls, tag::LOAD); // mov rax,[rbx]
    check(&[0x48, 0x89, 0x03], Class::Ls, tag::STORE); // mov [rbx],rax
    check(&[0x48, 0x03, 0x03], Class::Ls, tag::LOAD); // add rax,[rbx]
    check(&[0x48, 0x01, 0x03], Class::Ls, tag::LOAD | tag::STORE); // add [rbx],rax
}

#[test]
fn lea_and_memory_nops_are_not_memory_accesses() {
    check(&[0x48, 0x8d, 0x43, 0x08], Class::Int, 0); // lea rax,[rbx+8]
    check(&[0x0f, 0x1f, 0x44, 0x00, 0x00], Class::Int, 0); // nop dword [rax+rax]
    check(&[0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0], Class::Int, 0); // nop word [rax+rax+0]
}

#[test]
fn integer_alu() {
    check(&[0x48, 0x01, 0xd8], Class::Int, 0); // add rax,rbx
    check(&[0x48, 0x0f, 0x44, 0xc3], Class::Int, 0); // cmove rax,rbx
    check(&[0x0f, 0x94, 0xc0], Class::Int, 0); // sete al
    check(&[0x66, 0x0f, 0xef, 0xc0], Class::Int, tag::SIMD128); // pxor xmm0,xmm0
}

#[test]
fn control_transfers_are_branches() {
    check(&[0xeb, 0x00], Class::Br, 0); // jmp
    check(&[0x74, 0x00], Class::Br, 0); // je
    check(&[0xc3], Class::Br, tag::LOAD); // ret reads the return address
    check(&[0xe8, 0, 0, 0, 0], Class::Br, tag::STORE); // call pushes it
    check(&[0xff, 0xe0], Class::Br, 0); // jmp rax
    check(&[0x0f, 0x0b], Class::Br, 0); // ud2
}

#[test]
fn sse_and_avx_floating_point() {
    check(&[0xf2, 0x0f, 0x58, 0xc1], Class::Fp, 0); // addsd: scalar
    check(
        &[0x66, 0x0f, 0x58, 0xc1],
        Class::Fp,
        tag::VECTOR_FP | tag::SIMD128,
    ); // addpd
    let vaddpd_ymm = [0xc5, 0xf5, 0x58, 0xc2];
    check(&vaddpd_ymm, Class::Fp, tag::VECTOR_FP | tag::SIMD256);
    let vaddps_zmm = [0x62, 0xf1, 0x74, 0x48, 0x58, 0xc2];
    check(&vaddps_zmm, Class::Fp, tag::VECTOR_FP | tag::SIMD512);
    check(&[0xf2, 0x0f, 0x51, 0xc1], Class::Fp, 0); // sqrtsd
    check(&[0x66, 0x0f, 0x2e, 0xc1], Class::Fp, 0); // ucomisd
    check(&[0xf2, 0x0f, 0x2a, 0xc0], Class::Fp, 0); // cvtsi2sd xmm0,eax
    check(&[0xf2, 0x0f, 0xc2, 0xc1, 0x00], Class::Fp, 0); // cmpeqsd (SSE cmpsd)
    check(
        &[0x0f, 0x5b, 0xc1],
        Class::Fp,
        tag::VECTOR_FP | tag::SIMD128,
    ); // cvtdq2ps
}

#[test]
fn fma_family() {
    let vfmadd231pd = [0xc4, 0xe2, 0xf5, 0xb8, 0xc2];
    check(
        &vfmadd231pd,
        Class::Fp,
        tag::FMA | tag::VECTOR_FP | tag::SIMD256,
    );
    let vfmadd231sd = [0xc4, 0xe2, 0xf1, 0xb9, 0xc2];
    check(&vfmadd231sd, Class::Fp, tag::FMA);
    let vfnmadd213ps = [0xc4, 0xe2, 0x71, 0xac, 0xc2];
    check(
        &vfnmadd213ps,
        Class::Fp,
        tag::FMA | tag::VECTOR_FP | tag::SIMD128,
    );
}

#[test]
fn data_movement_is_not_floating_point() {
    check(&[0x0f, 0x28, 0xc1], Class::Int, tag::SIMD128); // movaps xmm0,xmm1
    check(
        &[0xf2, 0x0f, 0x10, 0x00],
        Class::Ls,
        tag::LOAD | tag::SIMD128,
    ); // movsd xmm0,[rax]
    check(&[0x0f, 0x54, 0xc1], Class::Int, tag::SIMD128); // andps
}

#[test]
fn x87() {
    check(&[0xd9, 0xc1], Class::Fp, tag::X87); // fld st(1): register-only, not a load
    check(&[0xdd, 0x00], Class::Fp, tag::X87 | tag::LOAD); // fld qword [rax]
    check(&[0xdd, 0x18], Class::Fp, tag::X87 | tag::STORE); // fstp qword [rax]
    check(&[0xd8, 0xc1], Class::Fp, tag::X87); // fadd st,st(1)
}

#[test]
fn string_instructions() {
    let both = tag::STRING | tag::LOAD | tag::STORE;
    check(&[0xf3, 0xa4], Class::Ls, both); // rep movsb
    check(&[0xa7], Class::Ls, tag::STRING | tag::LOAD); // cmpsd (string)
    check(&[0xf3, 0xab], Class::Ls, tag::STRING | tag::STORE); // rep stosd
}

/// Spec 001 §4.1: block 1 has 8 instructions, `push` first and `jmp` last; int 2, fp 0, br 1,
/// ls 5, i.e. 25.0 %, 0.0 %, 12.5 %, 62.5 %.
#[test]
fn worked_example_block_1() {
    let block: [&[u8]; 8] = [
        &[0x55],                   // push rbp
        &[0x48, 0x89, 0xe5],       // mov rbp,rsp
        &[0x48, 0x89, 0x7d, 0xf8], // mov [rbp-8],rdi
        &[0x48, 0x89, 0x75, 0xf0], // mov [rbp-16],rsi
        &[0x48, 0x8b, 0x45, 0xf8], // mov rax,[rbp-8]
        &[0x48, 0x83, 0xc0, 0x01], // add rax,1
        &[0x48, 0x89, 0x45, 0xf8], // mov [rbp-8],rax
        &[0xeb, 0x00],             // jmp
    ];
    let classifier = Classifier::new();
    let mut counts = ClassCounts::default();
    for bytes in block {
        counts.add(classify_bytes(&classifier, bytes).0);
    }
    assert_eq!((counts.int, counts.fp, counts.br, counts.ls), (2, 0, 1, 5));
    let percent = |n: u64| n as f64 * 100.0 / counts.total() as f64;
    assert_eq!(
        [
            percent(counts.int),
            percent(counts.fp),
            percent(counts.br),
            percent(counts.ls)
        ],
        [25.0, 0.0, 12.5, 62.5]
    );
}

#[test]
fn user_table_overrides_whole_mnemonics() {
    let table = "# my store\n[classes]\nlea = \"ls\"\nADDSD = \"int\"\n";
    let classifier = Classifier::from_toml(Path::new("t.toml"), table).unwrap();
    assert_eq!(
        classify_bytes(&classifier, &[0x48, 0x8d, 0x43, 0x08]).0,
        Class::Ls
    );
    assert_eq!(
        classify_bytes(&classifier, &[0xf2, 0x0f, 0x58, 0xc1]).0,
        Class::Int
    );
    assert_eq!(
        classify_bytes(&classifier, &[0x48, 0x01, 0xd8]).0,
        Class::Int
    );
}

#[test]
fn bad_tables_name_line_and_column() {
    let p = Path::new("t.toml");
    let err = Classifier::from_toml(p, "[classes]\nlea = \"memory\"\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "t.toml:2:7: class `memory`: expected br, fp, ls or int"
    );
    let err = Classifier::from_toml(p, "[classes]\nfoo = \"int\"\n").unwrap_err();
    assert_eq!(err.to_string(), "t.toml:2:1: unknown mnemonic `foo`");
    let err = Classifier::from_toml(p, "[classes]\nlea = \n").unwrap_err();
    assert!(err.to_string().starts_with("t.toml:2:"), "{err}");
    assert!(err.is_bad_input());
}
