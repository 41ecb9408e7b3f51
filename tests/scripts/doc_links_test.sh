#!/usr/bin/env bash
# tests/scripts/doc_links.py (CTest "scripts: ..."): every relative link and #anchor in README.md
# and docs/ resolves; and the checker itself fails on a broken file, a broken anchor and a broken
# image (in a temporary copy), so a pass means something.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
checker="$root/tests/scripts/doc_links.py"
. "$(dirname "$0")/refuses.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

python3 "$checker" "$root" README.md docs || fail "broken links in README.md or docs/ (above)"

# A small tree: good links (a file, a heading with code and punctuation, a repeated heading, an
# explicit anchor, a folder, a link inside code that is not one), then one broken link each.
mkdir -p "$tmp/docs/sub"
cat > "$tmp/docs/sub/page.md" <<'MD'
# Page
## `meshplan run`: train a plan (for real)
## Notes
## Notes
<a id="by-hand"></a>
MD
cat > "$tmp/README.md" <<'MD'
[page](docs/sub/page.md#meshplan-run-train-a-plan-for-real) [again](docs/sub/page.md#notes-1)
[hand](docs/sub/page.md#by-hand) [folder](docs/sub/) [web](https://example.com/x.md#y)
`[not a link](missing.md)` and [self](#readme)
# README
```
[in code](missing.md)
```
MD
python3 "$checker" "$tmp" README.md docs >/dev/null || fail "good links refused: $(python3 "$checker" "$tmp" README.md docs)"

expect_broken() {  # LINE WHAT: README.md with LINE appended must fail, naming WHAT
  cp "$tmp/README.md" "$tmp/good.md"
  echo "$1" >> "$tmp/README.md"
  local out rc
  out="$(python3 "$checker" "$tmp" README.md docs)"; rc=$?
  mv "$tmp/good.md" "$tmp/README.md"
  [ $rc -eq 1 ] || fail "'$1': exit $rc, want 1"
  grep -qF -- "$2" <<<"$out" || fail "'$1': want '$2' in: $out"
}
expect_broken "[gone](docs/sub/gone.md)" "README.md:8: docs/sub/gone.md: no such file docs/sub/gone.md"
expect_broken "[anchor](docs/sub/page.md#notes-2)" "no heading with the anchor #notes-2 in docs/sub/page.md"
expect_broken "![picture](docs/images/gui.png)" "no such file docs/images/gui.png"
expect_broken "[self](#nowhere)" "no heading with the anchor #nowhere in README.md"
echo "[up](../../README.md#nowhere)" >> "$tmp/docs/sub/page.md"
python3 "$checker" "$tmp" docs >/dev/null && fail "a broken anchor from docs/sub into README.md passed"
refuses_args() { python3 "$checker" "$@" >/dev/null 2>&1; [ $? -eq 2 ] || fail "args '$*': want exit 2"; }
refuses_args "$tmp"
refuses_args "$tmp" nothing-here.md
echo "doc_links_test.sh: ok"
