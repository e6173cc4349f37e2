#!/usr/bin/env bash
# Clean-room check: runs the README's quick start on a minimal Debian 12 root, as a new user's
# machine would see it, so a package that setup forgets to install fails here and not for them.
#
#   scripts/cleanroom.sh            debootstrap (cached) -> copy the checkout in -> in a chroot:
#                                   scripts/example.sh, then scripts/test.sh -L unit (without the
#                                   sanitizer and fuzzing steps, which CI runs outside)
#   scripts/cleanroom.sh --full     the second command as the README has it: the whole test suite
#   T2O_CLEANROOM_CACHE=DIR         where the pristine base root is cached
#                                   (default /var/cache/torch2onnx/cleanroom)
#   T2O_CLEANROOM_KEEP=1            keep the root afterwards (for a look inside); its path is printed
#
# Needs root (debootstrap, chroot, mounts). The chroot shares this machine's network, which here
# reaches only the package mirror apt uses and the npm registry. What is cached: the bare
# debootstrap root, keyed on the suite, mirror, variant and the packages it includes. Never cached:
# the packages setup installs, ONNX Runtime's Node package, and the project's build. The build
# compiles through this machine's ccache when it has one (bind-mounted): a cached object stands for a
# compilation with the same compiler, flags and header contents, so a header that setup forgot
# still fails the build (ccache looks headers up, finds none, and compiles), and linking and
# everything after it run as on a new machine.
# Exit code: 0 when both quick-start commands pass, 1 when one fails, 2 when the clean room itself
# could not be made.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUITE=bookworm
MIRROR="${T2O_CLEANROOM_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${T2O_CLEANROOM_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
VARIANT=minbase  # the smallest root Debian installs: essential + apt; a real machine has more
INCLUDE=""       # nothing beyond minbase: the quick start must install what it needs
CACHE="${T2O_CLEANROOM_CACHE:-/var/cache/torch2onnx/cleanroom}"
SECOND=(T2O_NO_SANITIZE=1 T2O_NO_FUZZ=1 scripts/test.sh -L unit)
if [[ ${1:-} == --full ]]; then SECOND=(scripts/test.sh); fi

log() { printf '[cleanroom %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 2; }

[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot and mounts)"
if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap"
  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null ||
    die "cannot install debootstrap"
fi

key=$(printf '%s\n' "$SUITE" "$MIRROR" "$VARIANT" "$INCLUDE" "$(debootstrap --version)" | sha256sum | cut -c1-16)
base="$CACHE/base-$key.tar"
mkdir -p "$CACHE"
if [[ ! -f $base ]]; then
  log "debootstrap $SUITE ($VARIANT) from $MIRROR (cached afterwards as $base)"
  tmp=$(mktemp -d "$CACHE/debootstrap.XXXXXX")
  t0=$SECONDS
  if ! debootstrap --variant="$VARIANT" ${INCLUDE:+--include="$INCLUDE"} "$SUITE" "$tmp" "$MIRROR" \
      >"$tmp.log" 2>&1; then
    tail -20 "$tmp.log" >&2
    rm -rf "$tmp" "$tmp.log"
    die "debootstrap failed"
  fi
  tar -C "$tmp" -cf "$base.part" . && mv "$base.part" "$base"
  rm -rf "$tmp" "$tmp.log"
  log "debootstrap took $((SECONDS - t0)) s"
else
  log "base root: cached $base"
fi

WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/t2o-cleanroom.XXXXXX")
R="$WORK/root"
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
  if [[ ${T2O_CLEANROOM_KEEP:-0} == 1 ]]; then
    log "kept $R"
  elif grep -q " $WORK/" /proc/mounts; then
    log "left $WORK: something is still mounted in it (the machine's ccache must not be removed with it)"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
mkdir -p "$R"
tar -C "$R" -xf "$base"

# What a fresh machine has: Debian's archive, its updates and security suites; a name server.
cat >"$R/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
EOF
cp -L /etc/resolv.conf "$R/etc/resolv.conf"
# Machines here reach the registries through a TLS proxy whose CA every machine is given (as
# NODE_EXTRA_CA_CERTS / SSL_CERT_FILE): the clean room gets the same, as provisioning, not as setup.
CA_ENV=()
ca="${NODE_EXTRA_CA_CERTS:-${SSL_CERT_FILE:-}}"
if [[ -n $ca && -f $ca ]]; then
  cp -L "$ca" "$R/etc/ssl-workplace-ca.crt"
  for v in NODE_EXTRA_CA_CERTS SSL_CERT_FILE CURL_CA_BUNDLE GIT_SSL_CAINFO; do CA_ENV+=("$v=/etc/ssl-workplace-ca.crt"); done
  log "machine CA bundle $ca provided as /etc/ssl-workplace-ca.crt"
fi
# Package scripts must not start services in the chroot.
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d" && chmod +x "$R/usr/sbin/policy-rc.d"
for m in proc sys dev dev/pts; do
  mkdir -p "$R/$m"
  case $m in
    proc) mount -t proc proc "$R/proc" ;;
    sys) mount -t sysfs sys "$R/sys" ;;
    dev) mount --bind /dev "$R/dev" ;;
    dev/pts) mount -t devpts devpts "$R/dev/pts" ;;
  esac
  mounted+=("$R/$m")
done
mkdir -p "$R/dev/shm" 2>/dev/null || true
mount -t tmpfs shm "$R/dev/shm" && mounted+=("$R/dev/shm")
CCACHE_ENV=(CCACHE_DISABLE=1)
if command -v ccache >/dev/null && cache=$(ccache -k cache_dir 2>/dev/null) && [[ -d $cache ]]; then
  mkdir -p "$R/root/.cache/ccache"
  mount --bind "$cache" "$R/root/.cache/ccache" && mounted+=("$R/root/.cache/ccache") &&
    CCACHE_ENV=(CCACHE_DIR=/root/.cache/ccache) && log "compiling through this machine's ccache ($cache)"
fi

# The checkout as git sees it (tracked files and new ones not ignored): no build folders, no caches.
mkdir -p "$R/root/torch2onnx"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done | tar --null -T - -cf -) |
  tar -C "$R/root/torch2onnx" -xf -
log "checkout copied: $(find "$R/root/torch2onnx" -type f | wc -l) files into $R/root/torch2onnx"

run_in_root() {
  chroot "$R" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 TERM=dumb "${CCACHE_ENV[@]}" "${CA_ENV[@]}" /bin/bash -c "cd /root/torch2onnx && $*"
}

status=0
# The Python package must import right after the first command (setup makes it importable).
IMPORT="python3 -c 'import torch2onnx; print(\"torch2onnx\", torch2onnx.__version__)'"
for cmd in "scripts/example.sh" "$IMPORT" "${SECOND[*]}"; do
  log "running in the clean room: $cmd"
  t0=$SECONDS
  if run_in_root "$cmd"; then
    log "passed: $cmd ($((SECONDS - t0)) s)"
  else
    rc=$?
    log "FAILED: $cmd (exit $rc after $((SECONDS - t0)) s)"
    status=1
    break
  fi
done
if ((status == 0)); then log "clean room: both quick-start commands passed (and torch2onnx imports in Python)"; fi
exit $status
