//! Writes `$OUT_DIR/slot_tags.rs`: for each of Redis Cluster's 16,384 hash
//! slots, the smallest decimal number whose CRC16 falls in it (the tags
//! that put the shared fence counters into their locks' slots), so that no
//! process pays for the search at run time. Nothing is written outside
//! `OUT_DIR`.

use std::path::Path;

#[path = "src/crc16.rs"]
mod crc16;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/crc16.rs");
    write_slot_tags();
}

/// `SLOT_TAGS[slot]`: the smallest decimal number `n` with
/// `crc16(n) % 16384 == slot` (all below 2^32; about 170,000 numbers are
/// tried).
fn write_slot_tags() {
    const SLOTS: usize = 16384;
    let mut tags = vec![u32::MAX; SLOTS];
    let mut missing = SLOTS;
    let mut n: u32 = 0;
    while missing > 0 {
        let slot = usize::from(crc16::crc16(n.to_string().as_bytes())) % SLOTS;
        if tags[slot] == u32::MAX {
            tags[slot] = n;
            missing -= 1;
        }
        n += 1;
    }
    let mut out = String::from(
        "/// For each cluster slot, the smallest decimal number hashing to it (build.rs).\n",
    );
    out.push_str(&format!("static SLOT_TAGS: [u32; {SLOTS}] = ["));
    for t in &tags {
        out.push_str(&format!("{t},"));
    }
    out.push_str("];\n");
    let path = Path::new(&std::env::var("OUT_DIR").unwrap()).join("slot_tags.rs");
    write_if_changed(&path, &out);
}

fn write_if_changed(path: &Path, content: &str) {
    if std::fs::read_to_string(path).ok().as_deref() == Some(content) {
        return;
    }
    let result =
        std::fs::create_dir_all(path.parent().unwrap()).and_then(|_| std::fs::write(path, content));
    if let Err(e) = result {
        println!("cargo:warning=could not write {}: {e}", path.display());
    }
}
