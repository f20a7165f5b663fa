# A guest that touches the device after the unbind without saying so: the
# unbind scenario, then one MAGIC read through devmem (the read the driver's
# worker makes, so only the count can tell). The harness must see an access
# nothing accounts for.
. /scenarios/unbind.sh
bars
devmem $bar0 32 > /dev/null
