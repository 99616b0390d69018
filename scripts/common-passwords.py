#!/usr/bin/env python3
"""Rebuilds Sources/GatehouseServer/Resources/common-passwords.txt from two permissively licensed lists on PyPI:

- Django's django/contrib/auth/common-passwords.txt.gz (BSD-3-Clause, the Django Software Foundation; the list
  was compiled by Royce Williams), and
- zxcvbn's "passwords" frequency list (zxcvbn 4.5.0 for Python, MIT, Daniel Wolf; after Dropbox's zxcvbn, MIT).

Entries are lower-cased, de-duplicated and sorted, one per line. Usage: scripts/common-passwords.py
"""
import gzip
import pathlib
import subprocess
import sys
import tempfile
import zipfile

OUT = pathlib.Path(__file__).resolve().parent.parent / "Sources/GatehouseServer/Resources/common-passwords.txt"

with tempfile.TemporaryDirectory() as folder:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", folder,
                    "django==5.2.19", "zxcvbn==4.5.0"], check=True)
    wheels = {p.name.split("-")[0].lower(): p for p in pathlib.Path(folder).glob("*.whl")}
    django = zipfile.ZipFile(wheels["django"]).read("django/contrib/auth/common-passwords.txt.gz")
    words = gzip.decompress(django).decode().split()
    namespace = {}
    exec(zipfile.ZipFile(wheels["zxcvbn"]).read("zxcvbn/frequency_lists.py").decode(), namespace)
    words += namespace["FREQUENCY_LISTS"]["passwords"]

unique = sorted({w.strip().lower() for w in words if w.strip()})
OUT.write_text("\n".join(unique) + "\n")
print(f"{len(unique)} passwords written to {OUT}")
