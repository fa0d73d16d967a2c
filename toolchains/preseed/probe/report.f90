! Fortran side of the probe report: configured vs run-time precision of
! real(c_long_double).
program iostack_probe_report_f
  use, intrinsic :: iso_c_binding, only : c_long_double
  implicit none
  include 'probe_config.inc'
  real(c_long_double) :: x
  x = 1
  write(*, '(a,i0,a,i0)') 'IOSTACK_Fortran_LDBL_PRECISION configured=', cfg_ldbl_precision, &
       ' runtime=', precision(x)
end program iostack_probe_report_f
