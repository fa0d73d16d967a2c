program probe_target
  use, intrinsic :: iso_c_binding, only : c_long_double
  implicit none
  real(c_long_double) :: x
  x = 1
  write(*, '(a,i0)') 'ldbl_precision=', precision(x)
end program probe_target
