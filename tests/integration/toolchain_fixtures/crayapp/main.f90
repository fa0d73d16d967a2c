! Number of threads that really ran an OpenMP parallel region.
program crayapp_f
  implicit none
  integer :: n
  n = 0
!$omp parallel reduction(+:n)
  n = n + 1
!$omp end parallel
  write(*, '(a,i0)') 'f_threads=', n
end program crayapp_f
