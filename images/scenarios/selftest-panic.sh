# A guest whose kernel panics: the harness must see the panic.
mount -t debugfs debugfs /sys/kernel/debug
insmod /lib/modules/lkdtm.ko
echo PANIC > /sys/kernel/debug/provoke-crash/DIRECT
