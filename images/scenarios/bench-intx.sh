# bench-intx: bench's steps, booted with pci=nomsi, so that the interrupt
# round trip is measured on INTx (cargo xtask bench only).
. /scenarios/bench.sh
