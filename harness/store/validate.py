"""What a run directory may hold: a run directory is untrusted input (CI downloads it), so
every record and manifest is checked, before any stage uses it, by the validator pydantic
derives from its declaration (harness.store.declare): no field is listed here a second time.

`check_record` and `check_manifest` raise `Malformed`, naming the field ('numerics[0].max_abs')
and what is wrong with its value; the readers (harness.store.rundir, harness.history.db)
add the file and line.
"""

from __future__ import annotations

from harness.store.declare import LARGEST_AMOUNT as LARGEST_AMOUNT
from harness.store.declare import SMALLEST_AMOUNT as SMALLEST_AMOUNT
from harness.store.declare import Malformed as Malformed
from harness.store.declare import SchemaError as SchemaError
from harness.store.manifest import check_manifest as check_manifest
from harness.store.records import RECORD_REQUIRED as RECORD_REQUIRED
from harness.store.records import check_record as check_record
