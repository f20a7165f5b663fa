fn main() {
    let path = std::env::args().nth(1).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let t = std::time::Instant::now();
    let img = coverage::Image::read("vmlinux", &bytes, &coverage::run::in_kernel_crate).unwrap();
    println!("read in {:?}", t.elapsed());
    println!("functions {}", img.functions.len());
    for f in img.functions.iter().take(3) { println!("  {:#x} {}", f.start, f.name); }
    println!("rows {} files {}", img.rows.len(), img.files.len());
    for f in img.files.iter().take(8) { println!("  file {f}"); }
}
