"""The commands a user types, past the parser: each module here is one command group's veneer over the library
(parse flags into library objects, call the library, print). `deploytool.cli` keeps the parser and a table naming
these modules; only the command that runs is imported, so `deploytool migrate` does not load the lab, the
studies or localize (a user model's run starts in a fraction of a second). The shared flags and the table
printer are in `common`."""
