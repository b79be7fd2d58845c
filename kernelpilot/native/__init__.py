"""Native candidates' kernels read and rebuilt without a full build: cubin ELF reading, the sources a kernel edit
touches, the records of full and device-only builds, the device-only build plan, SASS identity, and the worker's
replacement of the edited kernels."""
