"""chain-operator: a kopf operator for chain networks (snapshots on a schedule, rolling upgrades).

The package lives in `operator/chain_operator/`; its import name is `chain_operator` because a top-level
`operator` package would shadow the standard library's `operator` module.
"""
