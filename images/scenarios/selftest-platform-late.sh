# A guest that reads the platform demo node's window once after the driver
# let it go, without saying so: the platform scenario, then one devmem read
# of the node's first register (its unit address is its reg). No device log
# exists here: only the MMIO oracle, watching the window, can fail it.
. /scenarios/platform.sh
devmem 0x${pnode%%.*} 32 > /dev/null
