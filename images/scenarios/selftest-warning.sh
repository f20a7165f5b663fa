# A guest that prints a kernel WARNING and otherwise finishes normally:
# the harness must fail it anyway.
mount -t debugfs debugfs /sys/kernel/debug
insmod /lib/modules/lkdtm.ko
echo WARNING > /sys/kernel/debug/provoke-crash/DIRECT
check still_alive true
