#!/usr/bin/env bash
# Type-checks the SDK's Apple-only adapters here, where no Apple SDK exists.
#
# Each adapter in Sources/GatehouseClient sits behind `#if canImport(M)` for an Apple framework M. AppleStubs/M/
# declares the symbols of M that the adapters use, with the signatures Swift imports from Apple's headers; this script
# builds each folder into a module named M, so that `canImport(M)` is true, and type-checks the whole GatehouseClient
# module against them with the flags SwiftPM compiled it with. It does so twice, as iOS and as macOS: since `os(...)`
# cannot be true here, a copy of the sources is checked in which `os(iOS)` (then `os(macOS)`) reads `true` and every
# other `os(...)` reads `false`, and the stubs are built with STUB_OS_iOS (STUB_OS_macOS) for what differs between the
# two.
#
# It fails on any type error, naming the file and line in Sources/GatehouseClient; on a `canImport(M)` that neither
# the toolchain nor AppleStubs/ provides (that code would never be compiled here); and on a stub declaration that no
# adapter names: the stubs declare what the adapters use and no more (a declaration whose comment says `implied:` is
# used without being named, as a method's return type is). What it cannot check: `#available` and `@available`
# (ignored off Apple platforms), Objective-C runtime behaviour, and whether the frameworks do what their headers say.
#
# Usage: scripts/apple-typecheck.sh [--skip-build] [swift build options, e.g. -c release]
# Without --skip-build it first builds the GatehouseClient target, whose dependencies' modules it imports.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }
started=$(date +%s)

skip_build=
if [ "${1:-}" = --skip-build ]; then
    skip_build=1
    shift
fi
if [ -z "$skip_build" ]; then
    log "building the GatehouseClient target (its dependencies' modules are imported from the build)"
    swift build --target GatehouseClient "$@" >&2
fi
bin=$(swift build --show-bin-path "$@")
manifest="$(dirname "$(dirname "$bin")")/$(basename "$bin").yaml"
[ -f "$manifest" ] || {
    echo "apple-typecheck: no build manifest at $manifest (build first)" >&2
    exit 1
}

work=$(mktemp -d /tmp/gatehouse-apple-typecheck.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The flags SwiftPM compiles GatehouseClient with (search paths, module maps, -D, language mode, package name), less
# those that emit files.
python3 - "$manifest" >"$work/flags" <<'EOF'
import json, re, sys
text = open(sys.argv[1]).read()
match = re.search(r'^  "C\.GatehouseClient-[^"]*\.module":\n(?:    .*\n)*?    args: (\[.*\])$', text, re.M)
if not match:
    sys.exit("apple-typecheck: the build manifest has no GatehouseClient compile command (build first)")
args = json.loads(match.group(1))[1:]
drop_with_value = {"-emit-module-path", "-output-file-map", "-index-store-path", "-emit-objc-header-path"}
drop = {"-emit-dependencies", "-emit-module", "-incremental", "-c", "-enable-batch-mode", "-serialize-diagnostics",
        "-parseable-output", "-emit-objc-header", "-g"}
kept, i = [], 0
while i < len(args):
    arg = args[i]
    if arg in ("-Xcc", "-Xfrontend") and i + 1 < len(args):
        kept += args[i:i + 2]
        i += 2
        continue
    if arg in drop_with_value:
        i += 1
    elif not (arg in drop or arg.startswith("@") or re.fullmatch(r"-j\d+", arg)):
        kept.append(arg)
    i += 1
sys.stdout.write("\0".join(kept))
EOF
mapfile -d '' flags <"$work/flags"
# What a stub module needs of them: where the dependencies' modules and module maps are (CryptoKit re-exports Crypto).
search=()
for ((i = 0; i < ${#flags[@]}; i++)); do
    case ${flags[i]} in
        -I | -Xcc | -module-cache-path | -target | -swift-version)
            search+=("${flags[i]}" "${flags[i + 1]}")
            i=$((i + 1))
            ;;
    esac
done

# --- which modules are stubbed, and which code sits behind canImport ------------------------------------------------
# Dependencies first: CryptoKit's SecureEnclave keys take Security's access control and LocalAuthentication's context.
stubbed=()
for module in Security LocalAuthentication AuthenticationServices CryptoKit; do
    [ -d "AppleStubs/$module" ] && stubbed+=("$module")
done
for dir in AppleStubs/*/; do
    module=$(basename "$dir")
    [[ " ${stubbed[*]} " == *" $module "* ]] || stubbed+=("$module")
done

status=0
imported=$(grep -rhoE 'canImport\([A-Za-z0-9_]+\)' Sources/GatehouseClient | sed 's/canImport(\(.*\))/\1/' | sort -u)
for module in $imported; do
    [ -d "AppleStubs/$module" ] && continue
    if ! printf 'import %s\n' "$module" | swiftc -typecheck "${search[@]}" - >/dev/null 2>&1; then
        files=$(grep -rl "canImport($module)" Sources/GatehouseClient | paste -sd " " -)
        echo "apple-typecheck: canImport($module) in $files has no stub in AppleStubs/$module," \
            "so that code is never compiled here" >&2
        status=1
    fi
done

# --- build the stubs and type-check the module, as iOS and as macOS, side by side ---------------------------------
check() {
    local platform=$1 dir="$work/$1"
    mkdir -p "$dir/stubs" "$dir/src"
    exec >"$dir/log" 2>&1
    for module in "${stubbed[@]}"; do
        # Library evolution makes the stubs' enums open, as imported Objective-C enums are: a switch over one needs
        # `@unknown default`. (Its warning that Foundation here was built without it is silenced.)
        swiftc -emit-module -module-name "$module" -parse-as-library -enable-library-evolution -suppress-warnings \
            -D "STUB_OS_$platform" -I "$dir/stubs" "${search[@]}" \
            -emit-module-path "$dir/stubs/$module.swiftmodule" "AppleStubs/$module"/*.swift || {
            echo "apple-typecheck: the stub module $module does not compile"
            return 1
        }
    done
    # The sources as on $platform: os(...) answered in the #if and #elseif lines of a copy, line for line.
    (cd Sources/GatehouseClient && find . -name '*.swift') | while read -r file; do
        mkdir -p "$dir/src/$(dirname "$file")"
        sed -E "/^[[:space:]]*#(if|elseif)/{s/os\($platform\)/true/g; s/os\([A-Za-z]+\)/false/g}" \
            "Sources/GatehouseClient/$file" >"$dir/src/$file"
    done
    local sources=()
    mapfile -t sources < <(find "$dir/src" -name '*.swift' | sort)
    swiftc -typecheck -wmo -continue-building-after-errors -diagnostic-style=llvm "${flags[@]}" -I "$dir/stubs" \
        "${sources[@]}"
}
pids=()
for platform in iOS macOS; do
    check "$platform" &
    pids+=($!)
done
results=()
i=0
for platform in iOS macOS; do
    if wait "${pids[i]}"; then results+=("$platform:passed"); else results+=("$platform:failed"); status=1; fi
    i=$((i + 1))
done
# Errors wherever they are, warnings in the adapters only (the rest of the module's are the ordinary build's), each
# once: what macOS shares with iOS is shown under iOS alone. Paths name the original files: a line and column in the
# copy are the same.
python3 - "$work" "${results[@]}" <<'PY'
import re, sys
work, results = sys.argv[1], sys.argv[2:]
adapter = re.compile(r"canImport\((Security|LocalAuthentication|AuthenticationServices|CryptoKit|StoreKit)\)")
seen = set()
for result in results:
    platform, outcome = result.split(":")
    log = open("%s/%s/log" % (work, platform)).read()
    log = log.replace("%s/%s/src/" % (work, platform), "Sources/GatehouseClient/")
    blocks, counts = [], {"error": 0, "warning": 0}
    for line in log.splitlines():
        header = re.match(r"(\S+?):\d+:\d+: (error|warning|note|remark): ", line)
        if header or not blocks:
            blocks.append([line, header])
        else:
            blocks[-1][0] += "\n" + line
    for text, header in blocks:
        shown = True
        if header:
            path, severity = header.groups()
            counts[severity] = counts.get(severity, 0) + 1
            in_adapter = path.startswith("Sources/") and adapter.search(open(path).read())
            shown = severity == "error" or in_adapter or not path.startswith("Sources/")
        if shown and text not in seen:
            seen.add(text)
            print("\n".join("[%s] %s" % (platform, line) for line in text.splitlines()))
    print("apple-typecheck: [%s] %s (%d errors, %d warnings)" % (platform, outcome, counts["error"], counts["warning"]))
PY

# --- the stubs declare what the adapters use, and no more -------------------------------------------------------------
python3 - "${stubbed[@]}" <<'EOF' || status=1
import glob, os, re, sys

declaration = re.compile(r"\b(func|var|let|class|struct|enum|protocol|typealias|case)\s+([A-Za-z_][A-Za-z0-9_]*)")
failed = False
adapter_uses = {}
for module in sys.argv[1:]:
    adapters = {
        path: set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", re.sub(r"//.*", "", open(path).read())))
        for path in sorted(glob.glob("Sources/GatehouseClient/**/*.swift", recursive=True))
        if re.search(r"canImport\(%s\)" % module, open(path).read())}
    declared, unused = [], []
    for path in sorted(glob.glob("AppleStubs/%s/*.swift" % module)):
        lines = open(path).read().split("\n")
        for number, line in enumerate(lines, 1):
            code = re.sub(r"//.*", "", line)
            for kind, name in declaration.findall(code):
                # Protocol plumbing, and an enum's cases: it lists all of Apple's, whichever the adapters name.
                if name.startswith("_") or name == "rawValue" or kind == "case":
                    continue
                above = number - 2
                while above >= 0 and re.match(r"\s*(//|@)", lines[above]):
                    above -= 1
                if any("implied:" in l for l in lines[above + 1:number - 1]):
                    continue
                declared.append(name)
                users = [adapter for adapter, words in adapters.items() if name in words]
                for adapter in users:
                    adapter_uses.setdefault(adapter, set()).add(module + "." + name)
                if not users:
                    unused.append("%s:%d: %s" % (path, number, name))
    print("apple-typecheck: %s: %d symbols declared, %d named by %s" % (
        module, len(declared), len(declared) - len(unused), ", ".join(adapters) or "no adapter"))
    for entry in unused:
        print("apple-typecheck: %s is declared but no adapter behind canImport(%s) names it" % (entry, module))
        failed = True
for adapter, names in sorted(adapter_uses.items()):
    print("apple-typecheck: %s names %d stub symbols" % (adapter, len(names)))
sys.exit(1 if failed else 0)
EOF

echo "apple-typecheck: $([ $status = 0 ] && echo passed || echo failed) in $(($(date +%s) - started)) s"
exit $status
