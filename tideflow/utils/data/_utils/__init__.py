"""The DataLoader's machinery: collation, fetching, seeding, the worker processes and the
messages between them and the main process. Public names are re-exported by
`tideflow.utils.data`."""
