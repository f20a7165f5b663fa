# pm-soak: pm's system sleep fifty times in one boot (pm_test's `platform`
# level, no delay), the worker busy in between (the guest waits for its
# first read after each wake): every cycle the driver's
# sleep, D3hot, D0 and its wake; in the debug flavour kmemleak then looks for
# anything the cycles leaked. Then unbind.
sleeps() {
    i=1
    while [ $i -le 50 ]; do
        system_sleep || { echo "sleep $i"; return 1; }
        i=$((i + 1))
    done
}
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
check worker_reading wait_for 100 logged 1 "event worker_reading"
check pm_test_platform put /sys/power/pm_test platform
check pm_test_no_delay put /sys/module/suspend/parameters/pm_test_delay 0
check fifty_sleeps sleeps
check still_bound bound_to pci_rig
check unbind unbind_dev pci_rig
check unbound unbound
settle
