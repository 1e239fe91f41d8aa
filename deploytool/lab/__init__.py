"""The device lab: a nightly matrix across hosts, phones and browsers on Dask
distributed, with history and regression alerts that tolerate noise.

`labfile` reads and checks LAB.toml; `engine` runs cells on Dask (an embedded
LocalCluster by default, or `--scheduler tcp://...`), pinning each cell to the
worker that owns its resource; `night` plans a night's cells, stores each result
as it arrives and judges it against the last good night (`deploytool.lab.regress`);
`outputs` writes the lab report (HTML, Markdown, JUnit, JSON)."""
