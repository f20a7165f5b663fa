fn main() {
    let path = std::env::args().nth(1).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let img = coverage::Image::read("x", &bytes, &|n| !n.is_empty()).unwrap();
    println!("sections {:?}", img.sections);
    println!("functions {}", img.functions.len());
    for f in img.functions.iter().take(5) { println!("  {:#x} {}", f.start, f.name); }
    println!("rows {} files {}", img.rows.len(), img.files.len());
    for f in &img.files { println!("  file {f}"); }
    for r in img.rows.iter().take(5) { println!("  {:#x}-{:#x} {} {}", r.start, r.end, img.files[r.file as usize], r.line); }
}
