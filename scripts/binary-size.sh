#!/usr/bin/env bash
# What a default-features application pays for dylease, as a new user would measure it, part by
# part: stripped release builds of a program without dylease (it lists the directory instead),
# and of programs that build a host over a directory and acquire a lease: an eager set alone;
# with `catalog()`; with an on-demand set; and with all three (eager, on-demand, catalog()).
# Then, with the `isolate` feature on: the eager program unchanged, and one whose host is
# isolated; and, with default features, one whose host requires signed plugins
# (`HostBuilder::require_signed`). Prints what each pays over the program without dylease, and
# what each part adds to the eager program, and fails if the eager program or the three-part
# one exceeds its budget below, so a change that grows either is seen, or if the eager program
# already carries `catalog()`, on-demand sets or the verification of signatures (a program
# that does not use a part must not pay for it: the program that uses it must be larger by at
# least `pay_per_use` below); the figures in
# `docs::performance` ("Binary cost") are re-measured whenever this changes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# The budgets, in bytes: what `docs::performance` ("Binary cost") accounts for, part by part,
# as measured, plus a margin of 4 KiB each (rounded up to a whole KiB), for the drift of a
# toolchain or a dependency's patch release; a change that grows a program past its margin
# re-measures and says so there. Signed plugins' share of every program (`Error::Signature`
# and the load path's few lines that ask whether a host requires signatures) has 5 KiB.
budget=$((657 * 1024))
budget_three=$((707 * 1024))
# What using `catalog()`, an on-demand set or `require_signed` must add to the eager program, at least: each
# adds well over this (`docs::performance`), so a program that adds less carries the part
# whether it uses it or not.
pay_per_use=$((4 * 1024))
# What requiring signatures must add, at least: its cryptography alone (SHA-256, Ed25519 and
# its tables) is over 100 KiB, so an eager program that carries it, even with a few KiB of
# the load's signed path left out, is caught.
signed_pay_per_use=$((64 * 1024))

work="$root/target/binary-size"
mkdir -p "$work/with/src" "$work/without/src" "$work/catalog/src" "$work/on_demand/src" "$work/three/src" \
  "$work/isolate_on/src" "$work/isolated/src" "$work/signed/src"
write_manifest() {
  cat >"$1/Cargo.toml" <<TOML
[package]
name = "$2"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
$3

[profile.release]
strip = true

[workspace]
TOML
}
write_manifest "$work/with" with "dylease = { path = \"$root\" }"
write_manifest "$work/without" without ""
for app in catalog on_demand three signed; do
  write_manifest "$work/$app" "$app" "dylease = { path = \"$root\" }"
done
for app in isolate_on isolated; do
  write_manifest "$work/$app" "$app" "dylease = { path = \"$root\", features = [\"isolate\"] }"
done
cat >"$work/with/src/main.rs" <<'RUST'
fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "plugins".into());
    // SAFETY: a measurement program; the directory's plugins are its caller's.
    let host = unsafe { dylease::PluginHost::builder().dir(dir) }.build().unwrap();
    match host.acquire() {
        Ok(lease) => println!("{} plugins", lease.plugins().len()),
        Err(error) => println!("{error}"),
    }
}
RUST
cp "$work/with/src/main.rs" "$work/isolate_on/src/main.rs"
cat >"$work/isolated/src/main.rs" <<'RUST'
fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "plugins".into());
    // SAFETY: a measurement program; the directory's plugins are its caller's.
    let host = unsafe { dylease::PluginHost::builder().dir(dir) }.isolated().build().unwrap();
    match host.acquire() {
        Ok(lease) => println!("{} plugins", lease.plugins().len()),
        Err(error) => println!("{error}"),
    }
}
RUST
cat >"$work/signed/src/main.rs" <<'RUST'
fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "plugins".into());
    let keyring = dylease::sign::Keyring::new();
    // SAFETY: a measurement program; the directory's plugins are its caller's.
    let host = unsafe { dylease::PluginHost::builder().dir(dir) }.require_signed(keyring).build().unwrap();
    match host.acquire() {
        Ok(lease) => println!("{} plugins", lease.plugins().len()),
        Err(error) => println!("{error}"),
    }
}
RUST
cat >"$work/without/src/main.rs" <<'RUST'
fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "plugins".into());
    println!("{}", std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0));
}
RUST
cat >"$work/catalog/src/main.rs" <<'RUST'
fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "plugins".into());
    // SAFETY: a measurement program; the directory's plugins are its caller's.
    let host = unsafe { dylease::PluginHost::builder().dir(dir) }.build().unwrap();
    for entry in host.catalog().unwrap() {
        println!("{:?} {:?}", entry.manifest().map(|m| m.name().to_owned()), entry.refusal().is_some());
    }
    match host.acquire() {
        Ok(lease) => println!("{} plugins", lease.plugins().len()),
        Err(error) => println!("{error}"),
    }
}
RUST
cat >"$work/on_demand/src/main.rs" <<'RUST'
fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "plugins".into());
    // SAFETY: a measurement program; the directory's plugins are its caller's.
    let host = unsafe { dylease::PluginHost::builder().dir(dir) }.on_demand().build().unwrap();
    match host.acquire() {
        Ok(lease) => println!("{} plugins", lease.plugins().len()),
        Err(error) => println!("{error}"),
    }
}
RUST
cat >"$work/three/src/main.rs" <<'RUST'
fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "plugins".into());
    // SAFETY: a measurement program; the directory's plugins are its caller's.
    let eager = unsafe { dylease::PluginHost::builder().dir(&dir) }.build().unwrap();
    // SAFETY: as above.
    let lazy = unsafe { dylease::PluginHost::builder().dir(&dir) }.on_demand().build().unwrap();
    for entry in eager.catalog().unwrap() {
        println!("{:?} {:?}", entry.manifest().map(|m| m.name().to_owned()), entry.refusal().is_some());
    }
    match (eager.acquire(), lazy.acquire()) {
        (Ok(a), Ok(b)) => println!("{} {} plugins", a.plugins().len(), b.plugins().len()),
        (Err(error), _) | (_, Err(error)) => println!("{error}"),
    }
}
RUST
for app in with without catalog on_demand three isolate_on isolated signed; do
  cargo build --quiet --release --manifest-path "$work/$app/Cargo.toml" --target-dir "$work/target"
done
size() { stat -c %s "$work/target/release/$1"; }
without=$(size without)
with=$(size with)
cost=$((with - without))
three=$(($(size three) - without))
printf 'binary cost of dylease (default features, stripped release), over the same program without it:\n'
printf '  eager set:                          %7d bytes (%d KiB); budget %d KiB\n' "$cost" $((cost / 1024)) $((budget / 1024))
for app in catalog on_demand; do
  extra=$(($(size "$app") - with))
  printf '  eager set with %-20s %7d bytes (%+d KiB over the eager set)\n' "${app/on_demand/an on-demand set}:" \
    $(($(size "$app") - without)) $((extra / 1024))
done
printf '  eager + on-demand + catalog():      %7d bytes (%d KiB); budget %d KiB\n' "$three" $((three / 1024)) $((budget_three / 1024))
printf 'with the isolate feature on (no budget: a program that asks for it):\n'
for app in isolate_on isolated; do
  case $app in
    isolate_on) label="an eager set, isolated() not called:" ;;
    isolated) label="an isolated set:" ;;
  esac
  extra=$(($(size "$app") - with))
  printf '  %-36s%7d bytes (%+d KiB over the eager set)\n' "$label" $(($(size "$app") - without)) $((extra / 1024))
done
printf 'signed plugins (no budget: a program that asks for them):\n'
extra=$(($(size signed) - with))
printf '  %-36s%7d bytes (%+d KiB over the eager set)\n' "a host that requires signatures:" \
  $(($(size signed) - without)) $((extra / 1024))
status=0
if [ "$cost" -gt "$budget" ] || [ "$three" -gt "$budget_three" ]; then
  echo "binary-size: over the budget: find what grew (cargo bloat --release --crates), or raise the budget with the account in docs::performance" >&2
  status=1
fi
for app in catalog on_demand signed; do
  least=$pay_per_use
  [ "$app" = signed ] && least=$signed_pay_per_use
  if [ $(($(size "$app") - with)) -lt "$least" ]; then
    case $app in
      catalog) part="catalog()" turn_on="PluginHost::catalog" ;;
      on_demand) part="on-demand sets" turn_on="HostBuilder::on_demand stores load::demand::defer" ;;
      signed) part="signed plugins" turn_on="HostBuilder::require_signed stores the trust::Verifier that load::verifier makes" ;;
    esac
    echo "binary-size: a program that uses $part is less than $((least / 1024)) KiB larger than the eager one: the eager program carries it without using it (name its code only from what turns it on: $turn_on)" >&2
    status=1
  fi
done
exit "$status"
