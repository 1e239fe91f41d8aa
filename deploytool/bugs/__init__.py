"""Bug reporting: what a failing row leaves for an upstream maintainer. `bundle` writes a row's reproducer
folder (the model, the inputs that show the fault, expected and actual outputs, `files/reproduce.py`, copied
verbatim, which needs only numpy and the runtime); `findings` folds failing rows into distinct bugs by a
signature free of versions and names; `upstream` writes each finding's issue.md for the project that owns the
faulty part. It reads rows and a run's context; it never measures."""
