# mainline-spawn-unload (a finding in upstream's abstractions; run by name
# only): Linux 7.x's `Queue::try_spawn` is safe, and its Rust workqueue API
# has no way to cancel or wait for the closure it queues. spawn_unload.ko
# spawns one that sleeps 500 ms, then prints; the module is unloaded at once,
# so the closure's code is freed under it. A sound API makes this impossible
# to write without `unsafe`; on 7.x the kernel returns into freed module text.
check insmod_spawn_unload insmod /lib/modules/spawn_unload.ko
check rmmod_while_spawned rmmod spawn_unload
# The closure's end comes 500 ms after it started: wait past it.
check alive_after_closure sh -c 'sleep 2; echo alive'
