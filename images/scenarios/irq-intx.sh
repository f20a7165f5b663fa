# irq-intx: the kernel runs with pci=nomsi, so the driver takes its INTx pin
# (shared, masked by the hard half); the rest is unbind's.
. /scenarios/unbind.sh
