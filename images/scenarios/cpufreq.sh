# cpufreq: rcpufreq_dt (guest-kernel/platform, a Rust cpufreq-dt) binds the
# "pci-rig,cpufreq-dt" node the host added, with a settable CPU clock and an
# OPP table (harness/src/dt.rs). The policy must list the table; each
# frequency, set through the userspace governor, must show in
# scaling_cur_freq (the core's record), cpuinfo_cur_freq (read from the
# policy's clock) and as the clock's rate (debugfs); rmmod must unregister
# the driver and remove the policy. The host also judges the driver's and
# the clock's own lines.
ktap_plan 23
pol=/sys/devices/system/cpu/cpufreq/policy0
clk=/sys/kernel/debug/clk/pcirig-cpu/clk_rate
# The frequencies harness/src/dt.rs puts in the OPP table, in kHz.
opps="250000 500000 750000 1000000"
same() { [ "$1" = "$2" ] || { echo "got '$1', want '$2'"; return 1; }; }
check insmod_rcpufreq_dt insmod /lib/modules/rcpufreq_dt.ko
check driver_registered same "$(cat $pol/scaling_driver)" rcpufreq-dt
check policy_covers_both_cpus same "$(cat $pol/related_cpus)" "0 1"
check available_frequencies same "$(echo $(cat $pol/scaling_available_frequencies))" "$opps"
check userspace_governor put $pol/scaling_governor userspace
mount -t debugfs debugfs /sys/kernel/debug
for f in $opps; do
    check set_$f put $pol/scaling_setspeed $f
    check cur_$f same "$(cat $pol/scaling_cur_freq)" $f
    # Read through the driver's get (the policy's clock), not the core's record.
    check cpuinfo_$f same "$(cat $pol/cpuinfo_cur_freq)" $f
    check clock_$f same "$(cat $clk)" ${f}000
done
umount /sys/kernel/debug
check rmmod_rcpufreq_dt rmmod rcpufreq_dt
check policy_gone eval '[ ! -e $pol/scaling_driver ]'
