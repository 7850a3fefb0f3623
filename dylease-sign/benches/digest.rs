//! What verifying a signed library costs per MiB, beside the raw `sha2` digests of the same
//! bytes in the same run: the verification is a digest of the image plus the reads and one
//! Ed25519 signature check, so its throughput should be near the raw SHA-256's.
//!
//! `cargo bench -p dylease-sign --bench digest`

use std::fs;
use std::hint::black_box;
use std::path::Path;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dylease_sign::{Keyring, Release, SigningKey, sign_file_bytes};
use sha2::{Digest as _, Sha256, Sha512};

fn digest(c: &mut Criterion) {
    let key = SigningKey::from_seed(&[1; 32]);
    let mut keyring = Keyring::new();
    keyring.trust(key.public_key());
    let release = Release::new("bench", "1.0", 1);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));

    let mut group = c.benchmark_group("verify_per_mib");
    for mib in [1, 16] {
        let image: Vec<u8> = (0..mib << 20)
            .map(|i: usize| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let signed = [image.as_slice(), &sign_file_bytes(&image, &release, &key).unwrap()].concat();
        let path = dir.join(format!("bench-{mib}mib.so"));
        fs::write(&path, &signed).unwrap();
        group.throughput(Throughput::Bytes(image.len() as u64));

        group.bench_with_input(BenchmarkId::new("sha256_raw", mib), &image, |b, image| {
            b.iter(|| Sha256::digest(black_box(image)))
        });
        group.bench_with_input(BenchmarkId::new("sha512_raw", mib), &image, |b, image| {
            b.iter(|| Sha512::digest(black_box(image)))
        });
        group.bench_with_input(BenchmarkId::new("verify_bytes", mib), &signed, |b, signed| {
            b.iter(|| keyring.verify_bytes(black_box(signed), &path, Some("bench")).unwrap())
        });
        // The file as a host verifies it: an open descriptor, read from the page cache.
        let mut file = fs::File::open(&path).unwrap();
        group.bench_function(BenchmarkId::new("verify_file", mib), |b| {
            b.iter(|| keyring.verify_file(&mut file, &path, Some("bench")).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, digest);
criterion_main!(benches);
