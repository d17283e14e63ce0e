"""One module per op family; each defines `RECORDS: list[OpInfo]`."""
