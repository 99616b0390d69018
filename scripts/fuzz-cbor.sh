#!/usr/bin/env bash
# Fuzzes the passkey parsers with libFuzzer and AddressSanitizer: the CBOR decoder, authenticator data, attestation
# objects, COSE keys, client data and the credential JSON (Fuzz/CBOR/main.swift, with CBOR.swift and
# WebAuthnMessages.swift, which need nothing but Foundation). It writes a small seed corpus, builds, and runs.
#
#   scripts/fuzz-cbor.sh [seconds] [libFuzzer flags…]     e.g. scripts/fuzz-cbor.sh 600, or scripts/fuzz-cbor.sh 0 -runs=100000
#
# Seconds default to 60 (0: no time limit, for -runs=). The corpus grows in .build/fuzz-cbor/corpus (FUZZ_DIR to move
# it); a crashing input is written to .build/fuzz-cbor/artifacts/ and the script fails.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
dir="${FUZZ_DIR:-.build/fuzz-cbor}"
mkdir -p "$dir/corpus" "$dir/seeds" "$dir/artifacts"

# Seeds: RFC 8949 Appendix A items, ES256 and RS256 COSE keys, authenticator data, a packed attestation object, client
# data, and the two credential JSONs, as the SDK's software authenticator writes them.
hex_seed() { printf '%s' "$2" | xxd -r -p >"$dir/seeds/$1"; }
hex_seed rfc-map a26161016162820203
hex_seed rfc-nested 8301820203820405
hex_seed rfc-text 64f0908591
hex_seed rfc-negative 3bffffffffffffffff
hex_seed rfc-bytes 4401020304
hex_seed simple 83f4f5f6
key=a5010203262001215820b9ef444cf6162d5f139ce3042e615bd62d3c8b14da8fb9a6eda41bdae063418122582016819e64530788ea115db49175f322db5c5a31cde1f517a70cef6d1e8ac7c582
auth_data=a379a6f6eeafb9a55e378c118034e2751e682fab9f2d30ab13d2125586ce19474d00000000000000000000000000000000000000000020
auth_data+=78cb1a8f12e295e5a65d322a4a2e7861249b548cf292ca514468ddcdc3e608c2$key
hex_seed cose-key "$key"
# An RS256 key: {1: 3, 3: -257, -1: n (2048 bits), -2: 65537}.
hex_seed cose-key-rsa "a401030339010020590100c1$(printf '5a%.0s' {1..255})2143010001"
hex_seed auth-data "$auth_data"
hex_seed auth-data-extensions "${auth_data/#a379a6f6eeafb9a55e378c118034e2751e682fab9f2d30ab13d2125586ce19474d/a379a6f6eeafb9a55e378c118034e2751e682fab9f2d30ab13d2125586ce1947cd}a16b6372656450726f7465637402"
hex_seed assertion-auth-data a379a6f6eeafb9a55e378c118034e2751e682fab9f2d30ab13d2125586ce1947050000000a
hex_seed attestation-object "a363666d74667061636b65646761747453746d74a263616c67266373696758473045022100e20867eb7c1ba7ee73c8f7a705d945aa47b26ea54af7eecbdabd3f75ef9364b2022038351f2fd7733783771912c9fda1c4d4699001d643144d54406ebc1a2c67670c686175746844617461""58a4$auth_data"
printf '%s' '{"type":"webauthn.create","challenge":"BwcHBwcHBwcHBwcHBwcHBw","origin":"https://example.com","crossOrigin":false}' \
    >"$dir/seeds/client-data.json"
printf '%s' 'o2NmbXRkbm9uZWdhdHRTdG10oGhhdXRoRGF0YUIBAg' >"$dir/seeds/base64url"
printf '%s' '{"id":"eMsajxLileWmXTIqSi54YSSbVIzykspRRGjdzcPmCMI","rawId":"eMsajxLileWmXTIqSi54YSSbVIzykspRRGjdzcPmCMI","response":{"attestationObject":"o2NmbXRmcGFja2VkZ2F0dFN0bXSiY2FsZyZjc2lnWEcwRQIhAOIIZ-t8G6fuc8j3pwXZRapHsm6lSvfuy9q9P3Xvk2SyAiA4NR8v13M3g3cZEsn9ocTUaZAB1kMUTVRAbrwaLGdnDGhhdXRoRGF0YViko3mm9u6vuaVeN4wRgDTidR5oL6ufLTCrE9ISVYbOGUdNAAAAAAAAAAAAAAAAAAAAAAAAAAAAIHjLGo8S4pXlpl0yKkoueGEkm1SM8pLKUURo3c3D5gjCpQECAyYgASFYILnvREz2Fi1fE5zjBC5hW9YtPIsU2o-5pu2kG9rgY0GBIlggFoGeZFMHiOoRXbSRdfMi21xaMc3h9RenDO9tHorHxYI","clientDataJSON":"eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIiwiY2hhbGxlbmdlIjoiQndjSEJ3Y0hCd2NIQndjSEJ3Y0hCdyIsIm9yaWdpbiI6Imh0dHBzOi8vZXhhbXBsZS5jb20iLCJjcm9zc09yaWdpbiI6ZmFsc2V9","transports":["hybrid","internal"]},"type":"public-key"}' \
    >"$dir/seeds/registration.json"
printf '%s' '{"id":"eMsajxLileWmXTIqSi54YSSbVIzykspRRGjdzcPmCMI","rawId":"eMsajxLileWmXTIqSi54YSSbVIzykspRRGjdzcPmCMI","response":{"authenticatorData":"o3mm9u6vuaVeN4wRgDTidR5oL6ufLTCrE9ISVYbOGUcNAAAAAQ","clientDataJSON":"eyJ0eXBlIjoid2ViYXV0aG4uZ2V0IiwiY2hhbGxlbmdlIjoiQndjSEJ3Y0hCd2NIQndjSEJ3Y0hCdyIsIm9yaWdpbiI6Imh0dHBzOi8vZXhhbXBsZS5jb20iLCJjcm9zc09yaWdpbiI6ZmFsc2V9","signature":"MEUCIA8reUOq9GbmbtWo3qcjaKGpr5FTSXtWdYgzYEzVGin_AiEAggjG-1y17Dg-u5uyqgIGRYSmCNMVqcojl0DhwoaBX4g","userHandle":"AQEBAQEBAQEBAQEBAQEBAQ"},"type":"public-key"}' \
    >"$dir/seeds/assertion.json"

swiftc -sanitize=fuzzer,address -parse-as-library -O -use-ld=lld -module-name PasskeyFuzz \
    Sources/GatehouseServer/Passkeys/CBOR.swift Sources/GatehouseServer/Passkeys/WebAuthnMessages.swift \
    Fuzz/CBOR/main.swift -o "$dir/fuzz-cbor"

# The first folder collects new inputs; the seeds are read from the second.
exec "$dir/fuzz-cbor" -max_total_time="$seconds" -max_len=8192 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/" "$@" "$dir/corpus" "$dir/seeds"
