"""One run's machinery, below the orchestration of a whole migrate run (deploytool.migrate): what the user
asked (`request`, `flags`), what a run's rows share (`context`: spec, data, targets, sources and their PC
baselines), a user's model file as a run's source (`usermodel`), the PC baseline (`baseline`), one combination
converted, run and judged (`runner`, `judge`, `compare`), and a run's rows to and from the store and its report
(`stored`). Nothing here knows of localization, bug bundles or findings: they build on it."""
