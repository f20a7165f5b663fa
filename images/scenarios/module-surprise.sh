# module-surprise: a foreign module (`--module`) bound to our device, which
# then stops answering (every read all-ones, as a device that is gone) while
# the driver may be using it; the host removes it (QMP device_del) and the
# kernel ends the binding; the guest must live on and the module unload.
SURPRISE=1
. /scenarios/module-unplug.sh
