# mainline-kunit: kunit, on Linux 7.x: upstream's doctests ran before init.
. /scenarios/kunit.sh
